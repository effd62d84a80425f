"""A concat the memory planner puts in place (tests/test_memory_plan.py): two convolutions' outputs joined along
the rows (H, outermost but for batch in NHWC), so each lies in the concat's output as one run of bytes, and a
smaller channel concat after them, which interleaves its inputs and stays a copy."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class ModelUnderTest(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2d(4, 8, 3, padding=1)
        self.b = nn.Conv2d(4, 8, 3, padding=1)
        self.c = nn.Conv2d(8, 8, 1, stride=2)
        self.d = nn.Conv2d(16, 4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = torch.cat([torch.relu(self.a(x)), torch.relu(self.b(x))], dim=2)
        y = self.c(rows)
        return self.d(torch.cat([y, torch.max_pool2d(rows, 2)], dim=1))


ModelInputs = (torch.randn(1, 4, 10, 12),)
