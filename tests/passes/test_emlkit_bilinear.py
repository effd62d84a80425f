"""emlkit_bilinear.py: dq -> upsample_bilinear2d -> q -> emlkit::upsample_bilinear2d on Cortex-M, within 1 int8
step of the program that resizes in float and quantizes (the same qparams), for sizes, scale factors and
align_corners either way; the tables hold torch's own source positions."""

from __future__ import annotations

import pytest
import torch

from emlkit.passes.emlkit_bilinear import EmlkitBilinear, source_tables
from pass_graphs import assert_lowered_within_one_step, assert_pipelines


class _ConvUp(torch.nn.Module):
    def __init__(self, size: tuple[int, int] | None, scale: float | tuple[float, float] | None, align: bool) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv, self.size, self.scale, self.align = torch.nn.Conv2d(3, 4, 3, padding=1), size, scale, align

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.interpolate(self.conv(x), size=self.size, scale_factor=self.scale,
                                               mode="bilinear", align_corners=self.align)


@pytest.mark.parametrize("size, scale, align", [((10, 10), None, False), ((8, 13), None, True), (None, 2.0, True),
                                                (None, 1.5, False), (None, (2.0, 1.5), True), ((3, 4), None, False)])
def test_bilinear_lowered_within_one_step(size, scale, align) -> None:
    x = torch.randn(1, 3, 6, 7, generator=torch.Generator().manual_seed(4))
    model = _ConvUp(size, scale, align)
    ops = assert_lowered_within_one_step(model, x, EmlkitBilinear,
                                         lambda o: "emlkit" in o and "upsample_bilinear2d" in o,
                                         lambda o: "aten.upsample_bilinear2d" in o)
    assert not any("aten.upsample_bilinear2d" in o for o in ops)


def test_tables_are_torch_positions() -> None:
    """align_corners=True, 3 -> 5: positions 0, 0.5, 1, 1.5, 2; the last row reads row 2 twice."""
    rows, cols = source_tables(torch.ops.aten.upsample_bilinear2d.vec, ([5, 2], True, None), {}, 3, 2)
    assert rows.tolist() == [[0, 1, 0], [0, 1, 1024], [1, 2, 0], [1, 2, 1024], [2, 2, 0]]
    assert cols.tolist() == [[0, 1, 0], [1, 1, 0]]
    # align_corners=False, 2 -> 4: positions max(0, (i + 0.5) / 2 - 0.5) = 0, 0.25, 0.75, 1.25 (clamped to row 1)
    rows, _ = source_tables(torch.ops.aten.upsample_bilinear2d.vec, ([4, 1], False, None), {}, 2, 1)
    assert rows.tolist() == [[0, 1, 0], [0, 1, 512], [0, 1, 1536], [1, 1, 0]]


def test_pipelines() -> None:
    # on int8 Ethos-U targets only for the resizes the partitioner leaves on the CPU (tests/test_npu_cpu_int8.py)
    assert_pipelines(EmlkitBilinear, on=("cortex-m55", "cortex-m4", "ethos-u55-128"), off=("ethos-u85-256-a16w8",))
