"""A fused projection (one Linear for q, k and v) as one Linear per part (Ethos-U55/U65; cuts of the feature dim on Cortex-M).

Matches, in the exported float graph before quantization annotation, on
Ethos-U55/U65 targets (on Cortex-M targets: the split/chunk/slice forms only), `y = linear(x, W[N, C], b)` (constant W and b) whose
output is only read in parts of its N features, in one of the ways users write
a fused qkv projection:
- grouped: `r = reshape(y, [*lead, G, *tail])` (the N features split into G
  parts first), optionally `p = permute(r, perm)`, then every reader picks one
  part along the G axis with `select` or `unbind`:
  `qkv(x).reshape(b, t, 3, heads, hd).permute(2, 0, 3, 1, 4)` then
  `qkv[0], qkv[1], qkv[2]` (transformer_block, timm), or
  `qkv(x).reshape(b, t, 3, heads, hd).unbind(2)`;
- sliced: every reader cuts the feature dim into consecutive rows:
  `q, k, v = qkv(x).chunk(3, dim=-1)`, `qkv(x).split(d, -1)`, `y[..., :d]`,
  `y[..., d:2 * d]` (slices with step 1).

Produces, for each row range [a, b) that is read, `linear(x, W[a:b], b[a:b])`
(grouped: reshaped to [*lead, *tail] and permuted by perm without the G axis):
the same float function (each output feature is computed from the same weight
row), the same per-channel weight scales, and each part quantized with its own
range (transformer_block: 37.6 -> 38.0 dB on ethos-u55-128). A linear read as a
whole, or by anything else as well, is left as it is.

Why: Vela 5.1.0 (regor) lowers a TOSA MATMUL on the U55/U65 to elementwise MULs
and reductions per row, and when an operand is a SLICE of a tensor (here of the
qkv tensor after its TRANSPOSE and RESHAPE) the command stream reads it from the
start of the sliced tensor: the slice's offset is lost, at batch 2 and, after
split_batched_matmul.py's split, at batch 1 too (docs/ethos-u.md, "Known Vela
miscompiles"). transformer_block's delegate was 6 steps off in 396 outputs (the
compile-time NPU check, emlkit/npu/compile_check.py) and its run a MISCOMPILED; a
reshape + unbind form 57 steps off; with `chunk(3, -1)` or `y[..., :d]` read
directly by the matmuls, Vela's stream wrote past the end of a memory region
(the NPU model stops it; the device run ends in an npu_stream error).
With one Linear per part no MATMUL operand is a slice, and Vela's stream is
bit-exact with the TOSA graph. On the U85, split_batched_matmul.py covers the
same models; this pass is left off there. On Cortex-M, `chunk`/`split` became
`split_with_sizes_copy`, which no firmware kernel implements (the compile
stopped with that op named); one Linear per piece computes the same pieces
without the copy. Slices of the feature dim are taken there too: each part
gets its own output qparams, as on the NPU (gru_kws, whose gates are slices
of two Linears: 33.6 -> 35.0 dB on cortex-m55 over parity.py's 8 inputs, the
NPU's 35.2; QEMU instructions 104,750 -> 111,950 on M55, 186,160 -> 193,240 on
M4, from the extra layer calls). The grouped forms (select, unbind after a
reshape) stay as they are there (they have kernels).
"""

from __future__ import annotations

import logging
import math
import operator
from dataclasses import dataclass
from typing import Any

import torch

from emlkit.passes.graph import (SPLITS, Rewrite, add_parameter, const_tensor, copy_meta, finish, linear_operands,
                                 split_pieces)
from emlkit.passes.manager import declare

log = logging.getLogger(__name__)
aten = torch.ops.aten

RESHAPES = {aten.reshape.default, aten.view.default, aten._unsafe_view.default}
PERMUTES = {aten.permute.default}
SELECT = aten.select.int
UNBIND = aten.unbind.int
SLICE = aten.slice.Tensor
# Ops that cut a tensor into consecutive pieces along one dim; their getitems are the pieces.


@dataclass
class _Part:
    """One reader of the fused output and the weight rows [start, end) it reads, then laid out as `shape`
    (None: the linear's own [*lead, rows]) and permuted by `perm` (None: not permuted)."""

    reader: torch.fx.Node
    start: int
    end: int
    shape: list[int] | None = None
    perm: list[int] | None = None


def _shape(n: Any) -> list[int] | None:
    v = n.meta.get("val") if isinstance(n, torch.fx.Node) else None
    if not isinstance(v, torch.Tensor) or not all(isinstance(d, int) for d in v.shape):
        return None
    return list(v.shape)


def _op_name(reader: torch.fx.Node) -> str:
    """The op that reads a part: slice, select, or (for a getitem) the unbind/split/chunk it indexes."""
    op = reader.args[0].target if reader.target is operator.getitem else reader.target
    return str(getattr(op, "__name__", op)).split(".")[0]


def _dim(u: torch.fx.Node, pos: int, default: int = 0) -> Any:
    return u.args[pos] if len(u.args) > pos else u.kwargs.get("dim", default)


def _feature_slices(lin: torch.fx.Node, ax: int, n_out: int) -> list[_Part] | None:
    """Every reader of the linear's output cutting its feature dim (slice, split, chunk); else None.

    `y[..., :d]`, `y.split(d, -1)`, `q, k, v = y.chunk(3, -1)`: each piece is rows [a, b) of the weight."""
    out: list[_Part] = []
    for u in lin.users:
        if u.op == "call_function" and u.target is SLICE and _dim(u, 1) % (ax + 1) == ax:
            start, end = (u.args[2] if len(u.args) > 2 else u.kwargs.get("start"),
                          u.args[3] if len(u.args) > 3 else u.kwargs.get("end"))
            step = u.args[4] if len(u.args) > 4 else u.kwargs.get("step", 1)
            a, b, st = slice(start, end, step).indices(n_out)
            if st != 1 or b <= a:
                return None
            out.append(_Part(u, a, b))
        elif u.op == "call_function" and u.target in SPLITS and _dim(u, 2) % (ax + 1) == ax:
            pieces = split_pieces(u, ax)
            if pieces is None:
                return None
            out.extend(_Part(g, off, off + size) for g, off, size in pieces)
        else:
            return None
    return out or None


def _groups_read(src: torch.fx.Node, k: int, groups: int, rows: int, tail: list[int],
                 perm: list[int] | None) -> list[_Part] | None:
    """Every reader of `src` picking one group along axis k: selects, or an unbind's getitems; else None."""
    out: list[_Part] = []
    rank = len(_shape(src) or [])

    def part(reader: torch.fx.Node, i: int) -> _Part:
        return _Part(reader, i * rows, (i + 1) * rows, tail, perm)

    for u in src.users:
        if u.op != "call_function":
            return None
        if u.target is SELECT and len(u.args) == 3 and u.args[1] % rank == k and isinstance(u.args[2], int):
            out.append(part(u, u.args[2] % groups))
        elif u.target is UNBIND and _dim(u, 1) % rank == k:
            for g in u.users:
                if g.target is not operator.getitem or not isinstance(g.args[1], int):
                    return None
                if g.users:  # export keeps a getitem per part, read or not
                    out.append(part(g, g.args[1] % groups))
        else:
            return None
    return out or None


def _grouped(lin: torch.fx.Node, lead: list[int], n_out: int) -> list[_Part] | None:
    """The linear's output reshaped to [*lead, G, *tail] (G parts first), optionally permuted, read part by part."""
    ax = len(lead)
    if len(lin.users) != 1:
        return None
    r = next(iter(lin.users))
    rs = _shape(r)
    if r.target not in RESHAPES or rs is None or len(rs) < ax + 2 or rs[:ax] != lead or math.prod(rs[ax:]) != n_out:
        return None
    groups, tail = rs[ax], [*lead, *rs[ax + 1:]]
    if groups < 2:
        return None
    rows = n_out // groups
    if len(r.users) == 1 and next(iter(r.users)).target in PERMUTES:
        p = next(iter(r.users))
        perm = [d % len(rs) for d in p.args[1]]
        sub_perm = [d if d < ax else d - 1 for d in perm if d != ax]
        return _groups_read(p, perm.index(ax), groups, rows, tail, sub_perm)
    return _groups_read(r, ax, groups, rows, tail, None)  # `.unbind(2)` right after the reshape


@declare("pre_quant", ("aten.linear", "aten.select", "aten.unbind", "aten.slice", "aten.split", "aten.chunk"),
         runs_before=("FcRowsAsPixels", "LinearToConv"), order=40, targets=("cortex-m*", "ethos-u55*", "ethos-u65*"))
@dataclass
class SplitFusedProjection(Rewrite):
    # Whether only cuts of the feature dim are taken (Cortex-M), or every form (Ethos-U55/U65).
    feature_cuts_only: bool = False

    def bind(self, target: Any, options: Any) -> None:
        # Cortex-M: the firmware has no split_with_sizes kernel; a Linear per piece needs no copy either.
        self.feature_cuts_only = target.flow == "cortex_m"

    def run(self, gm: torch.fx.GraphModule) -> list[Any]:
        done: list[Any] = []
        for n in list(gm.graph.nodes):
            if n.op == "call_function" and n.target is aten.linear.default:
                self._rewrite(gm, n, done)
        finish(gm, "fused projections split", [r["node"] for r in done])
        return done

    def _rewrite(self, gm: torch.fx.GraphModule, lin: torch.fx.Node, done: list[Any]) -> bool:
        ops = linear_operands(gm, lin)
        if ops is None:
            return False
        n_out = int(ops.w.shape[0])
        if self.feature_cuts_only:
            parts = _feature_slices(lin, len(ops.lead), n_out)
        else:
            parts = _grouped(lin, ops.lead, n_out) or _feature_slices(lin, len(ops.lead), n_out)
        if parts is None or {(q.start, q.end) for q in parts} == {(0, n_out)}:
            return False  # nothing to split (one reader of every row)
        bias = const_tensor(gm, ops.b_node) if ops.b_node is not None else None
        fake = getattr(ops.xval, "fake_mode", None)
        g = gm.graph

        def node(target: Any, args: tuple[Any, ...], like: torch.fx.Node) -> torch.fx.Node:
            with g.inserting_before(lin):
                m = g.call_function(target, args)
            copy_meta(like, [m])
            if fake is not None:
                with fake:
                    m.meta["val"] = target(*(a.meta["val"] if isinstance(a, torch.fx.Node) else a for a in args))
            return m

        def const(t: torch.Tensor, stem: str) -> torch.fx.Node:
            name = add_parameter(gm, stem, t.detach().clone())
            with g.inserting_before(lin):
                c = g.get_attr(name)
            if fake is not None:
                c.meta["val"] = fake.from_tensor(getattr(gm, name), static_shapes=True)
            return c

        made: dict[tuple[int, int], torch.fx.Node] = {}
        for q in parts:
            key = (q.start, q.end)
            if key not in made:
                w = const(ops.w[q.start:q.end], "_aot_part_weight")
                b = const(bias[q.start:q.end], "_aot_part_bias") if bias is not None else None
                y = node(aten.linear.default, (ops.x, w, b), lin)
                if q.shape is not None:
                    y = node(aten.reshape.default, (y, q.shape), q.reader)
                if q.perm is not None:
                    y = node(aten.permute.default, (y, q.perm), q.reader)
                made[key] = y
            q.reader.replace_all_uses_with(made[key])
        done.append({"node": lin.name, "rows": [list(k) for k in sorted(made)],
                     "read_by": sorted({_op_name(q.reader) for q in parts})})
        return True
