"""Batched matmuls of two feature maps as one batch-1 matmul per batch entry (Ethos-U85 targets).

Matches, in the exported float graph before quantization annotation,
`aten.matmul(a, b)` and `aten.bmm(a, b)` where both operands are computed
tensors of rank >= 3 with the same (unbroadcast) leading dimensions holding
more than one batch entry, e.g. the per-head `q @ k^T` and `attn @ v` of
multi-head attention ([1, heads, T, d] @ [1, heads, d, T]), when the target's
NPU is an Ethos-U85.

Produces, for each leading dimension of size > 1 (outermost first),
`cat([f(slice(a, d, i, i+1), slice(b, d, i, i+1)) for i in range(size)], d)`
with f the same split over the remaining dimensions and, once none is left,
the original op on the slices: one matmul per batch entry, each with batch 1,
concatenated back into the original output shape. The float function is
unchanged (a matmul is independent per batch entry); the Arm quantizer gives
the concat's inputs and output one scale, so every slice matmul is quantized
as the batched one was (transformer_block: 37.6 dB before and after).

Why: Vela 5.1.0 (regor) miscompiles a batched MATMUL whose A operand is a
slice of a permuted tensor (q of a fused qkv projection reshaped into heads):
it splits the matmul per batch, but every batch reads A at batch 0's address
while B and the output advance (U85: both CONV weights_ifm2 ops have the same
IFM_BASE0). transformer_block was off by 6 steps in the compile-time NPU
check, a bare `qkv[0] @ qkv[1].transpose(-2, -1)` by 165. Split into batch-1
matmuls, Vela's U85 streams are bit-exact with the TOSA reference
(tests/test_zoo_targets.py). Every batched matmul of two feature maps is
split, not only those whose A is such a slice: the slices and the concat are
cheap data movement next to the matmul, and batch-1 matmuls and matmuls of
plain inputs (bit-exact today: regor folds their batch into the height) are
not affected anyway.

Not on Ethos-U55/U65: there regor lowers MATMUL to one elementwise MUL +
REDUCE_SUM per row and loses the slice's address offset even at batch 1
(both per-head matmuls read A from the start of the two-head tensor, with
its batch of 2), so the split leaves the repro 186 steps off and
transformer_block 5 steps off. Materialising the operands first (slices
pushed through the permute so each head's A and B come from their own
TRANSPOSE, or a multiply by 1.0) did not help either; those targets still
show the mismatch in the compile report (npu_check) until Vela is fixed.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Any

import torch

from emlkit.passes.manager import Pass, declare

log = logging.getLogger(__name__)
aten = torch.ops.aten

MATMULS = (aten.matmul.default, aten.bmm.default)
_KEEP_META = ("stack_trace", "nn_module_stack", "source_fn_stack", "from_node", "seq_nr")


def _val(n: Any) -> torch.Tensor | None:
    v = n.meta.get("val") if isinstance(n, torch.fx.Node) else None
    return v if isinstance(v, torch.Tensor) else None


# On the U55/U65 the split does not help.
@declare("pre_quant", ("aten.matmul", "aten.bmm"),
         order=100, flows=("ethos_u",), targets=("ethos-u85*",))
@dataclass
class SplitBatchedMatmul(Pass):
    rewritten: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)

    def report(self) -> dict[str, Any]:
        return {"rewritten": list(self.rewritten), "skipped": list(self.skipped)}

    def reset(self) -> None:
        self.rewritten, self.skipped = [], []

    def work(self, gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
        for n in list(gm.graph.nodes):
            if n.op == "call_function" and n.target in MATMULS:
                self._rewrite(gm, n)
        if self.rewritten:
            gm.graph.eliminate_dead_code()
            gm.graph.lint()
            gm.recompile()
            log.debug("split batched matmuls: %s", ", ".join(r["node"] for r in self.rewritten))
        return gm

    def _rewrite(self, gm: torch.fx.GraphModule, n: torch.fx.Node) -> bool:
        a, b = n.args[0], n.args[1]
        av, bv, ov = _val(a), _val(b), _val(n)
        if av is None or bv is None or ov is None or av.dim() < 3 or bv.dim() < 3:
            return False
        lead = list(ov.shape[:-2])
        if math.prod(lead) < 2:
            return False
        entry = {"node": n.name, "a": list(av.shape), "b": list(bv.shape)}
        if list(av.shape[:-2]) != lead or list(bv.shape[:-2]) != lead:
            self.skipped.append({**entry, "reason": "broadcast batch dimensions"})
            return False
        dims = [d for d, s in enumerate(lead) if s > 1]
        fake = getattr(ov, "fake_mode", None)
        g = gm.graph

        def make(target: Any, args: tuple[Any, ...]) -> torch.fx.Node:
            with g.inserting_before(n):
                m = g.call_function(target, args)
            for k in _KEEP_META:
                if k in n.meta:
                    m.meta[k] = n.meta[k]
            if fake is not None:
                def mv(v: Any) -> Any:
                    if isinstance(v, list):
                        return [mv(u) for u in v]
                    return v.meta["val"] if isinstance(v, torch.fx.Node) else v
                with fake:
                    m.meta["val"] = target(*(mv(v) for v in args))
            return m

        def split(idx: dict[int, int], rest: list[int]) -> torch.fx.Node:
            if not rest:  # one batch entry: slice both operands to it
                x, y = a, b
                for d, i in idx.items():
                    x = make(aten.slice.Tensor, (x, d, i, i + 1))
                    y = make(aten.slice.Tensor, (y, d, i, i + 1))
                return make(n.target, (x, y))
            d = rest[0]
            return make(aten.cat.default, ([split({**idx, d: i}, rest[1:]) for i in range(lead[d])], d))

        out = split({}, dims)
        n.replace_all_uses_with(out)
        g.erase_node(n)
        self.rewritten.append({**entry, "matmuls": math.prod(lead)})
        return True

