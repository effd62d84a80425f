"""Per-channel PReLU (also feeding an adaptive pool and a graph output both), adaptive average pools whose output does
not divide the input, floor_divide and embedding_bag (sum, mean with padding_idx, max, sum with include_last_offset),
and ConvTranspose1d/2d with output_padding in int8 on cortex-m55, cortex-m4 and cortex-m0plus (an385-m0plus) under
QEMU; slow: the model that found the PReLU defect (PReLU(8) into an adaptive pool and a ConvTranspose2d), bags with
per-sample weights, include_last_offset in modes mean and max (padding_idx) and two bags into a cat, and floor_divide
by a scalar and by a broadcast tensor, on cortex-m55 and cortex-m4. Each model compiles without --allow-float (no
aten:: compute op left), the device's outputs equal the host reference bit for bit, and each output's SNR against
the float model is at least the floor the README states."""

from __future__ import annotations

from pathlib import Path

import pytest
from qemu_run_lib import run_bit_exact

# What both models start from: a seeded Conv2d(3, 5) and the image input.
_PRELUDE = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Seeded(nn.Module):
    def __init__(self, seed):
        super().__init__()
        torch.manual_seed(seed)
        self.conv = nn.Conv2d(3, 5, 3, padding=1)


X = torch.randn(1, 3, 7, 9, generator=torch.Generator().manual_seed(1))
'''

_MODEL = _PRELUDE + '''

class Ops(Seeded):
    def __init__(self):
        super().__init__(3)
        self.prelu = nn.PReLU(5)
        with torch.no_grad():
            self.prelu.weight.copy_(torch.tensor([0.25, -0.5, 0.0, 1.5, 0.1]))
        self.bag_mean = nn.EmbeddingBag(12, 6, mode="mean", padding_idx=4)
        self.bag_sum = nn.EmbeddingBag(12, 6, mode="sum")
        self.bag_max = nn.EmbeddingBag(12, 6, mode="max")
        self.bag_last = nn.EmbeddingBag(12, 6, mode="sum", include_last_offset=True)

    def forward(self, x, y, idx, off):
        p = self.prelu(self.conv(x))  # read by the output and an adaptive pool (a float island before the fix)
        return (p, F.adaptive_avg_pool2d(p, (3, 4)), F.adaptive_avg_pool2d(x, (5, 2)),
                torch.floor_divide(x, y), self.bag_mean(idx, off), self.bag_sum(idx, off), self.bag_max(idx, off),
                self.bag_last(idx, off))


ModelUnderTest = Ops().eval()
ModelInputs = (X, torch.rand(1, 3, 7, 9, generator=torch.Generator().manual_seed(2)) + 0.25,
               torch.tensor([1, 2, 4, 5, 4, 3, 2, 9, 0, 11, 7]), torch.tensor([0, 4, 4, 9]))
'''

# Transposed convolutions with output_padding (below and above the padding, and 1-D), in a model of their own: the
# M0+ runner reports at most 8 outputs.
_UP_MODEL = _PRELUDE + '''

class Up(Seeded):
    def __init__(self):
        super().__init__(4)
        self.up = nn.ConvTranspose2d(5, 3, 3, stride=2, padding=1, output_padding=1)
        self.up_tail = nn.ConvTranspose2d(3, 2, (3, 2), stride=(3, 2), output_padding=(2, 1))
        self.up_1d = nn.ConvTranspose1d(3, 4, 4, stride=3, padding=1, output_padding=2)

    def forward(self, x):
        return self.up(self.conv(x)), self.up_tail(x), self.up_1d(x[:, :, 0])


ModelUnderTest = Up().eval()
ModelInputs = (X,)
'''

# The model that found the PReLU defect (conv -> PReLU(8) -> {adaptive pool to a size that does not divide the
# input, ConvTranspose2d}) with the bag and floor_divide forms added later.
_MORE_MODEL = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class More(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(5)
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.prelu = nn.PReLU(8)
        self.up = nn.ConvTranspose2d(8, 4, 3, stride=2, padding=1, output_padding=1)
        self.bag_w = nn.EmbeddingBag(12, 6, mode="sum")
        self.bag_mean = nn.EmbeddingBag(12, 6, mode="mean", include_last_offset=True)
        self.bag_max = nn.EmbeddingBag(12, 6, mode="max", include_last_offset=True, padding_idx=4)
        self.bag_cat = nn.EmbeddingBag(12, 5, mode="sum", padding_idx=2)

    def forward(self, x, idx, off, w):
        p = self.prelu(self.conv(x))
        return (F.adaptive_avg_pool2d(p, (3, 5)), self.up(p), self.bag_w(idx, off, per_sample_weights=w),
                self.bag_mean(idx, off), self.bag_max(idx, off),
                torch.cat([self.bag_cat(idx, off), self.bag_w(idx, off)], 1),
                torch.floor_divide(x, 0.3), torch.floor_divide(p, x[:, :1, :1].abs() * 0.1 + 0.05))


ModelUnderTest = More().eval()
ModelInputs = (torch.randn(1, 3, 5, 7, generator=torch.Generator().manual_seed(1)),
               torch.tensor([1, 2, 4, 5, 4, 3, 2, 9, 0, 11, 7]), torch.tensor([0, 4, 4, 9, 11]),
               torch.rand(11, generator=torch.Generator().manual_seed(2)) * 2 - 0.5)
"""

# The README's SNR floors against the float model (dB), per output: PReLU, the two pools, floor_divide (a floor
# jumps by 1 where the int8 input crosses an integer quotient), the four bags; the three transposed convolutions.
SNR_FLOOR_DB = {"ops": [30.0, 35.0, 35.0, 20.0, 35.0, 35.0, 35.0, 35.0], "up": [35.0, 35.0, 35.0],
                "more": [35.0, 35.0, 35.0, 35.0, 35.0, 35.0, 20.0, 20.0]}
_OPS = {"ops": {"emlkit::prelu": 1, "emlkit::adaptive_avg_pool2d": 2, "emlkit::floor_divide": 1,
                "emlkit::embedding_bag": 4},
        "up": {"cortex_m::quantized_transpose_conv2d": 3},
        "more": {"emlkit::prelu": 1, "emlkit::adaptive_avg_pool2d": 1, "cortex_m::quantized_transpose_conv2d": 1,
                 "emlkit::embedding_bag": 5, "emlkit::floor_divide": 2}}
_SOURCE = {"ops": _MODEL, "up": _UP_MODEL, "more": _MORE_MODEL}
# The quick pass runs each model on the M55; the M4 and M0+ runs are slow cases (their kernels are the portable and
# DSP ones that test_kernels.py checks against the reference in the quick pass).
_CASES = [pytest.param(w, t, b, marks=() if t == "cortex-m55" else pytest.mark.slow)
          for w in ("ops", "up") for t, b in (("cortex-m55", None), ("cortex-m4", None), ("cortex-m0plus", "an385-m0plus"))]
_CASES += [pytest.param("more", t, None, marks=pytest.mark.slow) for t in ("cortex-m55", "cortex-m4")]


@pytest.mark.parametrize("which, target, board", _CASES)
def test_int8_ops_bit_exact_on_qemu(tmp_path: Path, target: str, board: str | None, which: str) -> None:
    ops, snrs = run_bit_exact(tmp_path, f"int8_{which}", _SOURCE[which], target, board, len(SNR_FLOOR_DB[which]),
                              timeout=1200)
    assert {k: ops.get(k) for k in _OPS[which]} == _OPS[which], ops
    assert all(s >= f for s, f in zip(snrs, SNR_FLOOR_DB[which])), snrs
