"""Depthwise convolutions the memory planner puts in place with a lead (tests/test_memory_plan.py): each output
starts before its input by the firmware's lead. A 3x3 over 36 channels (the largest layer) (the MVE kernel's 16-channel groups and
their 4-channel tail, the DSP kernel's groups of four), a 5x5 over 16 channels (the MVE kernel's border columns,
which it takes pixel by pixel when the output overlaps the input) and a 3x3 at stride 2 (no lead: apart)."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class ModelUnderTest(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 36, 3, padding=1)
        self.dw3 = nn.Conv2d(36, 36, 3, padding=1, groups=36)
        self.pw1 = nn.Conv2d(36, 16, 1)
        self.dw5 = nn.Conv2d(16, 16, 5, padding=2, groups=16)
        self.dw_s2 = nn.Conv2d(16, 16, 3, stride=2, padding=1, groups=16)
        self.head = nn.Conv2d(16, 8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.dw3(torch.relu(self.stem(x))))
        y = torch.relu(self.dw5(self.pw1(y)))
        return self.head(torch.relu(self.dw_s2(y)))


ModelInputs = (torch.randn(1, 3, 12, 10),)
