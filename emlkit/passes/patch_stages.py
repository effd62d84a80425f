"""Patch-based execution of the high-resolution first stages: the early layers run one band of rows at a time.

Matches, in the final Cortex-M ExportedProgram (with `--patch-stages N`), the chain that starts at the
int8 input (the model input's `cortex_m::quantize_per_tensor`) and runs through
`cortex_m::quantized_conv2d` / `quantized_depthwise_conv2d` (NCHW logical, channels-last memory),
`quantized_add`, `quantized_mul` and `quantized_activation` nodes, up to the first node after which the
map has at most a quarter of the input's rows and every value the chain made is used inside it
(its only exit). MCUNetV2's observation: those first stages hold the largest maps, while the rest of the
network is small.

Produces, for each of N bands of the exit's output rows, a copy of the chain computing only the rows
that band needs: the row range of every node is taken backwards through the receptive field (a
convolution with kernel k, stride s, padding p and dilation d reads input rows [a*s - p, (z-1)*s - p +
(k-1)*d + 1) for output rows [a, z)), the int8 input is cut once per band (the halo included), and a
value holding more rows than a consumer reads is cut for it; rows are cut by `aten::constant_pad_nd`
with negative padding, which keeps the channels-last layout. A convolution inside the map runs with no H
padding; one whose windows reach the top or bottom edge keeps its symmetric H padding (the map's own on
that edge), its input starting at a multiple of the stride so that its rows stay the whole map's, and
the rows whose windows reach the padding on the cut side are cut away after it. The W padding is
unchanged. Every output element is then the same integer computation over the same input values as in
the whole-map chain, so the outputs are bit-identical. The bands meet in one `aten::cat` along H, which
replaces the exit's uses; the memory planner places each band's output straight inside it (cat in
place, emlkit/memory_plan.py), so only one band's intermediate maps are live at a time. The halo rows
are computed again by neighbouring bands, and the cuts copy: that is the cost (the report gives the
rows computed against the whole-map rows).

With `--patch-stages auto` (the CLI's default) the pass chooses the band count from the shapes alone,
without running anything: for each count 2..8 it takes every band's row ranges as above, the extra
MACs of the chain's convolutions (the halo rows computed again, against the whole map's), and an
estimate of the arena: the largest bytes of the values live at one call (in place where the firmware
allows it, a depthwise output starting before its input left out), for the chain's calls as bands (the
int8 input and the concat live throughout) and for the rest of the graph (the float input included).
It patches only where some count costs at most MAX_EXTRA_MACS more and takes the chain's estimate down to
the rest of the graph's (a partial saving is not worth its halo), with the count of least estimated
arena (then least halo); the report says what it chose and why.

Runs on the ExportedProgram after the passes that rewrite the convolutions' constants (each band's
copy shares them); KernelScratch (post stage) sizes the new nodes' scratch.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import torch

from emlkit.lower import PATCH_AUTO
from emlkit.passes.manager import Pass, declare

log = logging.getLogger(__name__)

CONV_OPS = ("quantized_conv2d", "quantized_depthwise_conv2d")
ROW_OPS = ("quantized_add", "quantized_mul", "quantized_activation")
# Schema slots (cortex_m::quantized_conv2d / quantized_depthwise_conv2d share the first six).
IN_ARG, STRIDE_ARG, PAD_ARG, DIL_ARG = 0, 3, 4, 5
OFFSET_ARG = {"quantized_conv2d": 6, "quantized_depthwise_conv2d": 7}
H = 2  # the rows' dim in the logical NCHW shape
MIN_SHRINK = 4  # the exit's map has at most 1/4 of the input's rows
AUTO_BANDS = range(2, 9)  # the counts auto tries
MAX_EXTRA_MACS = 0.10  # issue 33: auto patches where the halo rows cost at most 10% more MACs


@dataclass
class _Conv:
    k: int
    s: int
    p: int
    d: int

    def band(self, a: int, z: int, full: int) -> tuple[int, int, int, int, int]:
        """How output rows [a, z) of a map over FULL input rows are computed in a band: (first input row,
        end input row, H padding, global index of the conv's first output row, its number of output rows).

        Inside the map: exactly the rows the windows read, no H padding. At an edge the conv keeps its
        symmetric padding p, which is the map's own padding on that edge; on the other (cut) edge the padding
        would stand where real rows are, so the input starts at a multiple of the stride at or above the
        first window (then output row r is whole-map row first + r) and the rows whose windows reach the
        cut edge's padding are extra, cut away after the conv."""
        u0, u1 = a * self.s - self.p, (z - 1) * self.s - self.p + (self.k - 1) * self.d + 1
        if u0 >= 0 and u1 <= full:
            return u0, u1, 0, a, z - a
        i0 = 0 if u0 < 0 else (u0 // self.s) * self.s
        i1 = min(u1, full)
        rows = (i1 - i0 + 2 * self.p - (self.k - 1) * self.d - 1) // self.s + 1
        return i0, i1, self.p, i0 // self.s, rows


def _conv_geometry(n: Any) -> _Conv:
    """The H geometry of convolution node N (kernel rows, stride, padding, dilation)."""
    k = int(n.args[1].meta["val"].shape[1])  # OHWI (conv) / 1HWO (depthwise): KH at dim 1
    return _Conv(k, int(n.args[STRIDE_ARG][0]), int(n.args[PAD_ARG][0]), int(n.args[DIL_ARG][0]))


def _channels_last(val: Any) -> bool:
    return val is not None and val.dim() == 4 and list(val.dim_order()) == [0, 2, 3, 1]


def _with_rows(val: Any, rows: int) -> Any:
    """A fake tensor like VAL (N, C, H, W, channels last) with ROWS rows."""
    n, c, _, w = val.shape
    return val.new_empty_strided((n, c, rows, w), (rows * w * c, 1, w * c, c))


def _needs(start: Any, chain: list[Any], geo: dict[Any, _Conv], lo: int, hi: int) -> dict[Any, tuple[int, int]]:
    """The rows [r0, r1) each value of the chain (and the int8 input) holds in the band of exit rows [lo, hi):
    the hull of what its consumers in the chain read."""
    need: dict[Any, tuple[int, int]] = {chain[-1]: (lo, hi)}
    for n in reversed(chain):
        a, z = need[n]
        for src in n.all_input_nodes:
            if src is not start and src not in need and src not in chain:
                continue
            if n in geo and src is n.args[IN_ARG]:
                r0, r1, _, _, _ = geo[n].band(a, z, int(src.meta["val"].shape[H]))
            elif n in geo:
                continue  # a weight or bias
            else:
                r0, r1 = a, z
            o0, o1 = need.get(src, (r0, r1))
            need[src] = (min(o0, r0), max(o1, r1))
    return need


def _bytes(val: Any, rows: int | None = None) -> int:
    """Bytes of a map VAL (with ROWS rows instead of its own)."""
    n = val.numel() * val.element_size()
    return n if rows is None else n * rows // max(int(val.shape[H]), 1)


def _macs_per_row(n: Any) -> int:
    """MACs of one output row of convolution N (OHWI / 1HWO weights: KH*KW*Cin/groups per output element)."""
    out, w = n.meta["val"], n.args[1].meta["val"]
    per_out = int(w.shape[1]) * int(w.shape[2]) * (int(w.shape[3]) if int(w.shape[0]) == int(out.shape[1]) else 1)
    return per_out * int(out.shape[1]) * int(out.shape[3])


def _peak_at(n: Any, live: dict[Any, int], first: dict[Any, int], last: dict[Any, int],
             in_place: dict[Any, Any]) -> int:
    """Estimated arena at call N: the bytes of the values LIVE ((value, bytes), between FIRST and LAST) at it,
    less the smaller of output and input where the firmware lets the output lie over an input whose last use
    this is (memory_plan's in place)."""
    from emlkit import hostfw

    i = first[n]
    total = sum(b for v, b in live.items() if first[v] <= i <= last[v])
    slots = in_place.get((_op_name(n.target), "out"), {})  # the firmware runs the out variant of the op
    for k, a in enumerate(n.args):
        # an output ahead of its input by a lead (depthwise) is left out of this estimate
        if slots.get(k, hostfw.IN_PLACE_AHEAD) != hostfw.IN_PLACE_AHEAD and a in live and last[a] == i:
            return total - min(live[n], live[a])
    return total


def _op_name(target: Any) -> str:
    """`ns::name` of an edge op (hostfw.in_place_ops' key, with the out overload)."""
    schema = getattr(target, "_schema", None)
    return "" if schema is None else str(schema.name)


def _choose(ep: Any, start: Any, chain: list[Any], geo: dict[Any, _Conv]) -> dict[str, Any]:
    """auto: the band count (or "off") and why, from the shapes alone (see the module's docstring)."""
    from emlkit import hostfw

    exit_node, inside = chain[-1], set(chain)
    activations = set(ep.graph_signature.user_inputs)
    in_place = hostfw.in_place_ops()
    # The whole graph's values and lifetimes (graph order): the activations, not the constants.
    nodes = list(ep.graph_module.graph.nodes)
    first = {n: i for i, n in enumerate(nodes)}
    last = {n: max((first[u] for u in n.users), default=first[n]) for n in nodes}
    values = {n: _bytes(n.meta["val"]) for n in nodes if (n.op == "call_function" or n.name in activations)
              and hasattr(n.meta.get("val"), "numel")}
    calls = [n for n in nodes if n.op == "call_function" and n in values]
    rest = max((_peak_at(n, values, first, last, in_place) for n in calls if n not in inside), default=0)
    whole = max(_peak_at(n, values, first, last, in_place) for n in chain)
    # Values from outside the chain live across it (a skip around it): they stay in the bands' arena too.
    across = max(sum(b for v, b in values.items() if v is not start and v not in inside
                     and first[v] <= first[n] <= last[v]) for n in chain)
    # In a band (chain order): the int8 input and the concat live throughout, the chain's values in band rows.
    band_first: dict[Any, int] = {n: i for i, n in enumerate([start, *chain])}
    band_last: dict[Any, int] = {n: max((band_first[u] for u in n.users if u in band_first), default=band_first[n])
                 for n in [start, *chain]}
    band_last[start] = band_last[exit_node] = len(chain)
    macs_whole = sum(_macs_per_row(n) * int(n.meta["val"].shape[H]) for n in geo)
    rows_out = int(exit_node.meta["val"].shape[H])
    tried = {}
    for bands in (b for b in AUTO_BANDS if b <= rows_out):
        macs, peak = 0, 0
        for b in range(bands):
            need = _needs(start, chain, geo, b * rows_out // bands, (b + 1) * rows_out // bands)
            live: dict[Any, int] = {start: values[start], exit_node: values[exit_node]}
            for n in chain[:-1]:
                live[n] = _bytes(n.meta["val"], need[n][1] - need[n][0])
            for n in chain:
                if n in geo:
                    a, z = need[n]
                    src = n.args[IN_ARG]
                    i0, i1, _, _, rows = geo[n].band(a, z, int(src.meta["val"].shape[H]))
                    macs += _macs_per_row(n) * rows
                    if src is start:  # the band's cut of the int8 input, live at this conv only
                        live[("cut", n)] = _bytes(start.meta["val"], i1 - i0)
                        band_first[("cut", n)] = band_last[("cut", n)] = band_first[n]
                peak = max(peak, across + _peak_at(n, live, band_first, band_last, in_place))
        tried[bands] = (macs / max(macs_whole, 1) - 1.0, max(peak, rest))
    base = max(whole, rest)
    why = {"arena_estimate_whole_map": base, "rest_of_graph_estimate": rest,
           "tried": {b: {"extra_macs_pct": round(100 * e, 1), "arena_estimate": a} for b, (e, a) in tried.items()}}
    fits = {b: t for b, t in tried.items() if t[0] <= MAX_EXTRA_MACS}
    # Only where the bands take the chain below the rest of the graph: an estimate of a partial saving is not
    # worth its halo (patch_chain: 2 bands estimated -11% arena, measured -6% for +13% instructions).
    pays = {b: t for b, t in fits.items() if t[1] <= rest}
    if whole <= rest:
        return {"chose": "off", "why": f"the whole-map chain ({whole} B) does not bound the arena (the rest of the "
                f"graph: {rest} B)", "extra_macs_pct": 0.0, **why}
    if not pays:
        least = min(tried, key=lambda b: tried[b][0]) if tried else 0
        extra = round(100 * tried[least][0], 1) if tried else 0.0
        return {"chose": "off", "why": f"no band count within +{MAX_EXTRA_MACS:.0%} MACs takes the chain below the "
                f"rest of the graph's {rest} B (least extra: +{extra}% MACs, {least} bands)",
                "extra_macs_pct": extra, **why}
    best = min(pays, key=lambda b: (pays[b][1], pays[b][0]))  # the least arena, then the least halo
    extra = round(100 * pays[best][0], 1)
    return {"chose": best, "why": f"estimated arena {base} -> {pays[best][1]} B for +{extra}% MACs",
            "extra_macs_pct": extra, **why}


@declare("program", ("cortex_m.quantized_conv2d", "cortex_m.quantized_depthwise_conv2d", "cortex_m.quantized_add",
                     "cortex_m.quantized_activation", "aten.cat"),
         runs_after=("WindowBias", "FoldInputOffset", "DepthwiseOneChannelAsConv"), order=285,
         flows=("cortex_m",), options={"patch_stages": True})
class PatchStages(Pass):
    def __init__(self) -> None:
        self.bands = 0
        self.reset()

    def bind(self, target: Any, options: Any) -> None:
        self.bands = int(options.patch_bands)

    def reset(self) -> None:
        self.chain: list[str] = []
        self.rows_whole = 0
        self.rows_banded = 0
        self.used_bands = 0
        self.auto: dict[str, Any] = {}

    def report(self) -> dict[str, Any]:
        rep: dict[str, Any] = {"patch_bands": self.used_bands, "patched_nodes": self.chain,
                               "rows_computed": self.rows_banded, "rows_whole_map": self.rows_whole}
        if self.auto:
            rep["auto"] = self.auto
        return rep

    # ------------------------------------------------------------------ finding the chain
    def _ops(self) -> dict[Any, str]:
        from executorch.exir.dialects._ops import ops as exir_ops

        cm = exir_ops.edge.cortex_m
        return {getattr(cm, n).default: n for n in CONV_OPS + ROW_OPS if hasattr(cm, n)}

    def _find(self, gm: Any, ops: dict[Any, str]) -> tuple[Any, list[Any]] | None:
        """The int8 input node and the chain's nodes in graph order (the exit last), or None."""
        from executorch.exir.dialects._ops import ops as exir_ops

        quant = exir_ops.edge.cortex_m.quantize_per_tensor.default
        start = next((n for n in gm.graph.nodes if n.op == "call_function" and n.target is quant
                      and isinstance(n.args[0], torch.fx.Node) and n.args[0].op == "placeholder"
                      and _channels_last(n.meta.get("val"))), None)
        if start is None:
            return None
        rows0 = int(start.meta["val"].shape[H])
        inside: set[Any] = {start}
        chain: list[Any] = []
        best: list[Any] | None = None
        for n in gm.graph.nodes:
            if n.op != "call_function" or n in inside:
                continue
            feeds = [a for a in n.all_input_nodes if a in inside]
            if not feeds:
                continue
            if n.target not in ops or not _channels_last(n.meta.get("val")) or any(
                    a not in inside and _channels_last(a.meta.get("val")) for a in n.all_input_nodes):
                break  # an op the bands cannot run, or a map from outside the chain
            if ops[n.target] in CONV_OPS and (n.args[IN_ARG] not in inside or list(n.args[DIL_ARG])[0] < 1):
                break
            if ops[n.target] in ROW_OPS and any(int(a.meta["val"].shape[H]) != int(n.meta["val"].shape[H])
                                                for a in feeds):
                break
            inside.add(n)
            chain.append(n)
            # An exit: every value of the chain but n is used inside it only, and n's map is small.
            if int(n.meta["val"].shape[H]) * MIN_SHRINK <= rows0 and all(
                    all(u in inside for u in m.users) for m in [start, *chain[:-1]]):
                best = list(chain)
                break
        return (start, best) if best else None

    # ------------------------------------------------------------------ rewriting
    def work(self, ep: Any) -> Any:
        from executorch.exir.dialects._ops import ops as exir_ops

        gm = ep.graph_module
        ops = self._ops()
        found = self._find(gm, ops)
        if found is None or self.bands in (0, 1):
            log.info("patch stages: no high-resolution chain with a single exit found; the program is unchanged")
            if found is None and self.bands == PATCH_AUTO:
                self.auto = {"chose": "off", "why": "no high-resolution chain with a single exit"}
            return ep
        start, chain = found
        exit_node = chain[-1]
        rows_out = int(exit_node.meta["val"].shape[H])
        geo = {n: _conv_geometry(n) for n in chain if ops[n.target] in CONV_OPS}
        if self.bands == PATCH_AUTO:
            self.auto = _choose(ep, start, chain, geo)
            log.info("patch stages auto: %s", self.auto)
            if self.auto["chose"] == "off":
                return ep
            bands = int(self.auto["chose"])
        else:
            bands = min(self.bands, rows_out)
        g = gm.graph
        # Rows are cut with constant_pad_nd's negative padding, which keeps the channels-last layout (a
        # slice_copy is written contiguous when ExecuTorch traces the program again, then a transposing copy).
        crop_op, cat_op = exir_ops.edge.aten.constant_pad_nd.default, exir_ops.edge.aten.cat.default
        outs = []
        self.rows_whole = sum(int(n.meta["val"].shape[H]) for n in chain)
        for b in range(bands):
            need = _needs(start, chain, geo, b * rows_out // bands, (b + 1) * rows_out // bands)
            outs.append(self._band(g, start, chain, geo, need, crop_op))
        with g.inserting_before(exit_node):
            cat = g.call_function(cat_op, (outs, H))
        cat.meta = dict(exit_node.meta)
        exit_node.replace_all_uses_with(cat)
        for n in reversed(chain):
            g.erase_node(n)
        g.lint()
        gm.recompile()
        self.chain = [n.name for n in chain]
        self.used_bands = bands
        log.info("patch stages: %d nodes in %d bands, %d rows computed for %d", len(chain), bands,
                 self.rows_banded, self.rows_whole)
        return ep

    def _band(self, g: Any, start: Any, chain: list[Any], geo: dict[Any, _Conv], need: dict[Any, tuple[int, int]],
              crop_op: Any) -> Any:
        """One band's copy of CHAIN, computing the rows NEED gives each node; returns the exit's band value."""
        exit_node = chain[-1]
        made: dict[Any, Any] = {}

        def rows_of(src: Any, r0: int, r1: int, before: Any) -> Any:
            """SRC's band value cut to rows [r0, r1) (a slice where it holds more)."""
            have, (h0, h1) = made[src], need[src]
            if (h0, h1) == (r0, r1):
                return have
            with g.inserting_before(before):
                s = g.call_function(crop_op, (have, [0, 0, h0 - r0, r1 - h1], 0))
            s.meta["val"] = _with_rows(src.meta["val"], r1 - r0)
            return s

        with g.inserting_before(exit_node):  # band by band: one band's maps live at a time
            s0, s1 = need[start]
            x = g.call_function(crop_op, (start, [0, 0, -s0, s1 - int(start.meta["val"].shape[H])], 0))
        x.meta["val"] = _with_rows(start.meta["val"], s1 - s0)
        made[start] = x
        for n in chain:
            a, z = need[n]
            args = list(n.args)
            cut = None
            if n in geo:
                src = n.args[IN_ARG]
                i0, i1, pad, first, rows = geo[n].band(a, z, int(src.meta["val"].shape[H]))
                args[IN_ARG] = rows_of(src, i0, i1, exit_node)
                args[PAD_ARG] = [pad, int(n.args[PAD_ARG][1])]
                if (first, rows) != (a, z - a):
                    cut = (first, rows)
            else:
                args = [rows_of(v, a, z, exit_node) if isinstance(v, torch.fx.Node) and v in made else v
                        for v in args]
            with g.inserting_before(exit_node):
                new = g.call_function(n.target, tuple(args), dict(n.kwargs))
            new.meta = {k: v for k, v in n.meta.items() if k != "val"}
            new.meta["val"] = _with_rows(n.meta["val"], cut[1] if cut else z - a)
            self.rows_banded += cut[1] if cut else z - a
            if cut:  # the rows whose windows reached the cut edge's padding go
                with g.inserting_before(exit_node):
                    new = g.call_function(crop_op, (new, [0, 0, cut[0] - a, z - cut[0] - cut[1]], 0))
                new.meta["val"] = _with_rows(n.meta["val"], z - a)
            made[n] = new
        return made[exit_node]
