"""Two branches written interleaved (tests/test_op_order.py): in graph order both wide maps are live at once; run
one branch to its narrow end before the other starts and only one is."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a1 = nn.Conv2d(4, 32, 3, padding=1)
        self.b1 = nn.Conv2d(4, 32, 3, padding=1)
        self.a2 = nn.Conv2d(32, 8, 3, stride=2, padding=1)
        self.b2 = nn.Conv2d(32, 8, 3, stride=2, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = torch.relu(self.a1(x))
        b = torch.relu(self.b1(x))
        return self.a2(a) + self.b2(b)


ModelUnderTest = Net().eval()
ModelInputs = (torch.randn(1, 4, 16, 16),)
