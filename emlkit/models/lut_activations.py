"""A conv followed by elementwise chains that a single lookup table can replace."""
import torch

from emlkit.models._blocks import ConvThen

torch.manual_seed(0)


def chains(y: torch.Tensor) -> torch.Tensor:
    a = torch.sigmoid(y) * 2.0 + 0.5
    b = torch.tanh(y) - 0.25
    return a + b


ModelUnderTest = ConvThen(3, 8, chains).eval()
ModelInputs = (torch.randn(1, 3, 16, 16),)
