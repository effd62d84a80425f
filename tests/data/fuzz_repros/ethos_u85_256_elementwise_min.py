"""Random model 'fam:14' from scripts/fuzz_models.py (unshrunk): its minimum becomes an NPU ELEMENTWISE MIN on ethos-u85-256,
which the U85 functional model did not know and raised a KeyError on, then a SKIP naming the command; modelled since
(emlkit/npu/execute_u85.py), it PASSes bit-exactly on the host runtime and under QEMU (47.1 dB)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class Fuzz(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.b3a = nn.Conv2d(8, 8, 1)
        self.b3b = nn.Conv2d(8, 4, 3, 1, 1)
        self.b5 = nn.Conv2d(12, 12, 1)
        self.fc = nn.Linear(1536, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu6(x)
        x = x.permute(0, 1, 3, 2)
        x = F.interpolate(x, scale_factor=2, mode="nearest")
        x = torch.cat([torch.sigmoid(self.b3a(x)), F.relu(self.b3b(x))], dim=1)
        x = F.avg_pool2d(x, 2)
        x = torch.minimum(x, self.b5(x))
        x = F.log_softmax(x, dim=1)
        x = self.fc(torch.flatten(x, 1))
        x = torch.softmax(x, dim=-1)
        return x


ModelUnderTest = Fuzz().eval()
ModelInputs = (torch.randn(1, 8, 8, 16),)
