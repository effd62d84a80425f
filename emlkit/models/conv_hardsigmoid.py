"""A conv followed by F.hardsigmoid (the gate of squeeze-excite / MobileNetV3 blocks)."""
import torch
import torch.nn.functional as F

from emlkit.models._blocks import ConvThen

torch.manual_seed(0)

ModelUnderTest = ConvThen(4, 8, F.hardsigmoid).eval()
# Small activations: the conv output never reaches -3 or +3, where hardsigmoid saturates.
ModelInputs = (0.25 * torch.randn(1, 4, 12, 12),)
