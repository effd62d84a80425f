"""ExecuTorch's Python reference of cortex_m::quantized_conv2d accumulates with torch's F.conv2d on int32
tensors, which torch's CPU backend cannot do for dilated convolutions ("slow_conv_dilated<> not implemented
for 'Int'"). While host references run, this gives that module an F whose conv2d computes integer dilated
convolutions in float64 instead: every int8 x int8 product and every partial sum is an integer far below
2^53, so the result is exact and equal to the integer convolution the firmware computes."""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

import torch
import torch.nn.functional as F


def _pair(v: Any) -> tuple[int, ...]:
    return tuple(v) if isinstance(v, (list, tuple)) else (int(v), int(v))


class _FunctionalWithIntConv:
    def __getattr__(self, name: str) -> Any:
        return getattr(F, name)

    @staticmethod
    def conv2d(input: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, stride: Any = 1,
               padding: Any = 0, dilation: Any = 1, groups: int = 1) -> torch.Tensor:
        if input.is_floating_point() or all(d == 1 for d in _pair(dilation)):
            return F.conv2d(input, weight, bias, stride, padding, dilation, groups)
        out = F.conv2d(input.double(), weight.double(), None if bias is None else bias.double(), stride, padding,
                       dilation, groups)
        return out.round().to(input.dtype)


@contextlib.contextmanager
def exact_int_conv() -> Iterator[None]:
    # The passes package first: importing the ops module on its own hits a circular import in ExecuTorch.
    from executorch.backends.cortex_m.passes.replace_quant_nodes_pass import ReplaceQuantNodesPass  # noqa: F401
    from executorch.backends.cortex_m.ops import operators

    saved = operators.F
    operators.F = _FunctionalWithIntConv()  # type: ignore[assignment]
    try:
        yield
    finally:
        operators.F = saved
