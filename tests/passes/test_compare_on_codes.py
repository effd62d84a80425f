"""compare_on_codes.py: a comparison of a dequantized int8 tensor with a number runs on the codes, with the integer
where the answer changes; every code gives what the float comparison gave, and no float op or broken program is
left (before the pass, ExecuTorch's lowering left a float comparison reading int8 codes)."""

from __future__ import annotations

import random

import pytest
import torch

from emlkit.passes.compare_on_codes import CODES, CompareOnCodes, codes_form
from pass_graphs import installed, lowered, program_ops

aten = torch.ops.aten
qd = torch.ops.quantized_decomposed
_TORCH = {aten.gt.Scalar: torch.gt, aten.ge.Scalar: torch.ge, aten.lt.Scalar: torch.lt, aten.le.Scalar: torch.le,
          aten.eq.Scalar: torch.eq, aten.ne.Scalar: torch.ne}


def test_every_code_compares_as_its_value() -> None:
    rng = random.Random(7)
    cases = 0
    for _ in range(400):
        scale, zp = 10 ** rng.uniform(-3, 0), rng.randint(-128, 127)
        values = qd.dequantize_per_tensor.default(CODES, scale, zp, -128, 127, torch.int8)
        # numbers between codes, on codes, outside the range, and NaN
        c = rng.choice([float(values[rng.randrange(256)]), rng.uniform(-200, 200) * scale,
                        float(values[rng.randrange(256)]) + scale / 3, 1e9, -1e9, float("nan")])
        for op, fn in _TORCH.items():
            form = codes_form(fn(values, c))
            if op in (aten.eq.Scalar, aten.ne.Scalar) and form is None:
                continue
            assert form is not None, (op, scale, zp, c)
            new_op, k = form
            assert -128 <= k <= 127 and isinstance(k, int)
            assert torch.equal(_TORCH[new_op](CODES, k), fn(values, c)), (op, scale, zp, c, form)
            cases += 1
    assert cases > 2000


def test_a_set_no_single_comparison_describes_is_left_alone() -> None:
    truth = torch.zeros(256, dtype=torch.bool)
    truth[10:12] = True
    assert codes_form(truth) is None


class Cmp(torch.nn.Module):
    def __init__(self, op: str, c: float) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.l, self.op, self.c = torch.nn.Linear(8, 12), op, c

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.l(x)
        return y.masked_fill(getattr(torch, self.op)(y, self.c), 0.0)


@pytest.mark.parametrize("op, c", [("gt", 0.3), ("le", -0.2), ("eq", 0.0), ("ne", 0.0), ("lt", 100.0),
                                   ("ge", float("nan"))])
def test_comparison_of_a_quantized_tensor_leaves_no_float_op(op: str, c: float) -> None:
    x = torch.randn(5, 8, generator=torch.Generator().manual_seed(3))
    low, opts = lowered(Cmp(op, c), x, "cortex-m55")
    assert installed(opts, CompareOnCodes).report()["rewritten"] == [op]
    assert low.extra["verify"]["float_islands"] == [] and low.extra["verify"]["broken"] == []
    assert any(f"aten.{cmp}.Scalar" in o for o in program_ops(low) for cmp in ("gt", "ge", "lt", "le", "eq", "ne"))


def test_without_the_pass_the_program_was_broken() -> None:
    from emlkit.errors import AotError

    x = torch.randn(5, 8, generator=torch.Generator().manual_seed(3))
    with pytest.raises(AotError, match="float kernel aten::gt reads integer tensor"):
        lowered(Cmp("gt", 0.3), x, "cortex-m55", drop=("CompareOnCodes",), allow_float=True)
