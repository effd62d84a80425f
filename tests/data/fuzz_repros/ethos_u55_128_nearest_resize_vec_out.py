"""Random model 'fam:8' from scripts/fuzz_models.py (shrunk to its resize block) on ethos-u55-128: a nearest resize of
a 4x4 map to 3x1 stays on the CPU as aten::upsample_nearest2d.vec_out, whose four arguments (input, output_size,
scale_factors, out) the host executor took for the default overload's four (self, output_size, scales_h, scales_w):
a crash. The device ran it right (QEMU PASS, 42.8 dB)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class Fuzz(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.interpolate(x, size=(3, 1), mode="nearest")
        return x


ModelUnderTest = Fuzz().eval()
ModelInputs = (torch.randn(1, 8, 4, 4),)
