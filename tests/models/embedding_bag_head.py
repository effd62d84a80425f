"""Embedding bags (mean, and weighted sum) into a Linear: the NPU does not take the bags, so an Ethos-U compile
leaves them on the CPU, where they run as int8 table sums; the Linear reads their codes."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class Head(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.mean = nn.EmbeddingBag(12, 8, mode="mean")
        self.sum = nn.EmbeddingBag(12, 8, mode="sum")
        self.fc = nn.Linear(16, 4)
        self.register_buffer("w", torch.rand(10) + 0.5)

    def forward(self, idx: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        a = self.mean(idx, offsets)
        b = self.sum(idx, offsets, per_sample_weights=self.w)
        return self.fc(torch.cat([a, b], dim=1))


ModelUnderTest = Head().eval()
ModelInputs = (torch.tensor([1, 2, 4, 5, 4, 3, 2, 9, 11, 0]), torch.tensor([0, 4, 7]))
