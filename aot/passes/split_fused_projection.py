"""A fused projection (one Linear for q, k and v) as one Linear per part (Ethos-U55/U65 targets).

Matches, in the exported float graph before quantization annotation, on
Ethos-U55/U65 targets:
    y = linear(x, W[N, C], b)                        (constant W and b)
    r = reshape(y, [*lead, G, *tail])                (the N features split into G parts first)
    p = permute(r, perm)                             (the G axis moved to axis k)
    select(p, k, i) for some parts i                 (every user of p), or unbind(p, k)
the fused qkv projection of multi-head attention written as users (and timm)
write it: `qkv(x).reshape(b, t, 3, heads, hd).permute(2, 0, 3, 1, 4)`, then
`qkv[0], qkv[1], qkv[2]` (transformer_block).

Produces, for each part i that is read, `linear(x, W[i*N/G:(i+1)*N/G], b[...])`
reshaped to [*lead, *tail] and permuted by perm without the G axis: the same
float function (each output feature is computed from the same weight row),
the same per-channel weight scales, and each part quantized with its own range
(transformer_block: 37.6 -> 38.0 dB on ethos-u55-128).

Why: Vela 5.1.0 (regor) lowers a TOSA MATMUL on the U55/U65 to elementwise MULs
and reductions per row, and when an operand is a SLICE of a tensor (here of the
qkv tensor after its TRANSPOSE and RESHAPE) the command stream reads it from the
start of the sliced tensor: the slice's offset is lost, at batch 2 and, after
split_batched_matmul.py's split, at batch 1 too (README, "Known Vela
miscompiles"). transformer_block's delegate was 6 steps off in 396 outputs (the
compile-time NPU check, aot/npu/compile_check.py) and its run a MISCOMPILED.
With one Linear per part no MATMUL operand is a slice, and Vela's stream is
bit-exact with the TOSA graph. On the U85, split_batched_matmul.py covers the
same models; this pass is left off there.
"""

from __future__ import annotations

import logging
import math
import operator
from dataclasses import dataclass
from typing import Any

import torch

from aot.passes._graph import Rewrite, add_parameter, const_tensor, copy_meta, finish
from aot.passes.linear_to_conv import linear_operands
from aot.passes.manager import declare

log = logging.getLogger(__name__)
aten = torch.ops.aten

RESHAPES = {aten.reshape.default, aten.view.default, aten._unsafe_view.default}
PERMUTES = {aten.permute.default}
SELECT = aten.select.int
UNBIND = aten.unbind.int


def _shape(n: Any) -> list[int] | None:
    v = n.meta.get("val") if isinstance(n, torch.fx.Node) else None
    if not isinstance(v, torch.Tensor) or not all(isinstance(d, int) for d in v.shape):
        return None
    return list(v.shape)


def _parts_read(p: torch.fx.Node, k: int, groups: int) -> list[tuple[torch.fx.Node, int]] | None:
    """(node, part) for every reader of permute p along axis k: selects, or an unbind's getitems; else None."""
    out: list[tuple[torch.fx.Node, int]] = []
    rank = len(_shape(p) or [])
    for u in p.users:
        if u.op != "call_function":
            return None
        if u.target is SELECT and len(u.args) == 3 and u.args[1] % rank == k and isinstance(u.args[2], int):
            out.append((u, u.args[2] % groups))
        elif u.target is UNBIND and (u.args[1] if len(u.args) > 1 else u.kwargs.get("dim", 0)) % rank == k:
            for g in u.users:
                if g.target is not operator.getitem or not isinstance(g.args[1], int):
                    return None
                if g.users:  # export keeps a getitem per part, read or not
                    out.append((g, g.args[1] % groups))
        else:
            return None
    return out or None


@declare("pre_quant", ("aten.linear", "aten.select", "aten.unbind"), runs_before=("FcRowsAsPixels", "LinearToConv"))
@dataclass
class SplitFusedProjection(Rewrite):
    report_key: str = "split_fused_projection"

    def set_target(self, target: Any, options: Any) -> None:
        npu = target.npu or ""
        self.active = target.flow == "ethos_u" and (npu.startswith("ethos-u55") or npu.startswith("ethos-u65"))

    def run(self, gm: torch.fx.GraphModule) -> list[Any]:
        done: list[Any] = []
        for n in list(gm.graph.nodes):
            if n.op == "call_function" and n.target is aten.linear.default:
                self._rewrite(gm, n, done)
        finish(gm, "fused projections split", [r["node"] for r in done])
        return done

    def _rewrite(self, gm: torch.fx.GraphModule, lin: torch.fx.Node, done: list[Any]) -> bool:
        ops = linear_operands(gm, lin)
        if ops is None or len(lin.users) != 1:
            return False
        r = next(iter(lin.users))
        rs, n_out, ax = _shape(r), int(ops.w.shape[0]), len(ops.lead)
        if r.target not in RESHAPES or rs is None or len(rs) < ax + 2 or rs[:ax] != ops.lead \
                or math.prod(rs[ax:]) != n_out or len(r.users) != 1:
            return False
        groups, tail = rs[ax], rs[ax + 1:]
        p = next(iter(r.users))
        if p.target not in PERMUTES or groups < 2:
            return False
        perm = [d % len(rs) for d in p.args[1]]
        k = perm.index(ax)
        reads = _parts_read(p, k, groups)
        if reads is None:
            return False
        sub_perm = [d if d < ax else d - 1 for d in perm if d != ax]
        rows = n_out // groups
        bias = const_tensor(gm, ops.b_node) if ops.b_node is not None else None
        fake = getattr(ops.xval, "fake_mode", None)
        g = gm.graph

        def node(target: Any, args: tuple[Any, ...], like: torch.fx.Node, before: torch.fx.Node) -> torch.fx.Node:
            with g.inserting_before(before):
                m = g.call_function(target, args)
            copy_meta(like, [m])
            if fake is not None:
                with fake:
                    m.meta["val"] = target(*(a.meta["val"] if isinstance(a, torch.fx.Node) else a for a in args))
            return m

        def const(t: torch.Tensor, stem: str, before: torch.fx.Node) -> torch.fx.Node:
            name = add_parameter(gm, stem, t.detach().clone())
            with g.inserting_before(before):
                c = g.get_attr(name)
            if fake is not None:
                c.meta["val"] = fake.from_tensor(getattr(gm, name), static_shapes=True)
            return c

        made: dict[int, torch.fx.Node] = {}
        for reader, i in reads:
            if i not in made:
                w = const(ops.w[i * rows:(i + 1) * rows], "_aot_part_weight", lin)
                b = const(bias[i * rows:(i + 1) * rows], "_aot_part_bias", lin) if bias is not None else None
                y = node(aten.linear.default, (ops.x, w, b), lin, lin)
                y = node(aten.reshape.default, (y, [*ops.lead, *tail]), r, lin)
                made[i] = node(aten.permute.default, (y, sub_perm), p, lin)
            reader.replace_all_uses_with(made[i])
        done.append({"node": lin.name, "parts": groups, "read": sorted(made), "rows_each": rows})
        return True
