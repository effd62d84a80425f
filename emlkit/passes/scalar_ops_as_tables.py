"""Scalar add/sub/mul/div as int8 tables, one per op, when LUT fusion is off.

Matches, in the converted pt2e graph: `dequantize -> op -> quantize` where op is add, sub, mul or div whose
other operand is a Python scalar or a one-element constant, with quantized boundaries on both sides.

Not matched: a stretch next to another pointwise op, before or after it: ExecuTorch lowers that op (an
activation) as its own pattern, which expects an op it lowered itself on the other side; those stay as before
(refused, or float under --allow-float).

Produces one table lookup (`y_q = T[x_q]`) per stretch of such ops between two quantized boundaries, built and
lowered as LutFusion builds its tables (emlkit/passes/lut_backends.py), but never across a quantized boundary:
no requantization is dropped, so each quantized op keeps its own output quantization, as unfused.

Why: with `--no-lut-fusion` these ops had no int8 lowering (ExecuTorch 1.5.1's Cortex-M quantizer has no
scalar-operand arithmetic), so `x * 2 + 0.5` was refused, or ran in float under --allow-float, and what fusion
gains could not be measured against an int8 program.
"""

from __future__ import annotations

from typing import Any

import torch

from emlkit.passes import lut_backends
from emlkit.passes.graph import BINARY_OPS, UNARY_OPS
from emlkit.passes.lut_fusion import FusionReport, Region, find_regions
from emlkit.passes.manager import declare


_ARITH = frozenset(op for op in BINARY_OPS if getattr(op, "__name__", "").split(".")[0] in ("add", "sub", "rsub", "mul", "div"))


@declare("pre_edge", ("aten.add", "aten.sub", "aten.mul", "aten.div"), order=191, options={"lut_fusion": False})
class ScalarOpsAsTables(lut_backends.LutFusion):
    @classmethod
    def create(cls, opts: Any, allow_float: bool) -> "ScalarOpsAsTables":
        # its own report entry: LutFusion's stays what fusion did (nothing, when it is off)
        return cls(choose_backend=lut_backends.backend_for, report_key="scalar_tables")

    def regions(self, gm: torch.fx.GraphModule, rep: FusionReport) -> list[Region]:
        return [r for r in find_regions(gm, rep, single=True)
                if all(op.target in _ARITH for op in r.ops) and not _after_pointwise(r) and not _before_pointwise(r)]


def _pointwise(n: object) -> bool:
    return isinstance(n, torch.fx.Node) and n.op == "call_function" and (n.target in UNARY_OPS or n.target in BINARY_OPS)


def _before_pointwise(r: Region) -> bool:
    """Whether the region's quantize feeds, through a dequantize, a pointwise op ExecuTorch lowers as its own
    pattern (an activation), which expects its input from an op ExecuTorch lowered."""
    return any(_pointwise(u) for dq in r.output_q.users for u in dq.users)


def _after_pointwise(r: Region) -> bool:
    """Whether the region reads the quantize of a pointwise op, which ExecuTorch lowers as its own table and
    whose quantize it folds only into a dequantize that follows: a table reading it directly breaks that."""
    return _pointwise(r.input_node.args[0] if r.input_node.args else None)
