"""Random models 100:34 and 100:46 (ethos-u55-128-a16w8), reduced: an int16 convolution whose output a gating
mul and a residual add read. ExecuTorch's RewriteConvPass gave those consumers the convolution's accumulator
rescaled straight to int32, which Vela 5.1.0 refuses on the U55 ("Non-passthrough operation (Conv2D) could not
run on NPU"); fixed by emlkit/passes/npu_a16w8_conv_rescale.py."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class ConvIntoMulAdd(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.b1 = nn.Conv2d(4, 8, 3, 1, 1)
        self.b2 = nn.Conv2d(8, 8, 1)
        self.b3 = nn.Conv2d(8, 8, 3, 1, 1)
        self.fc = nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = nn.functional.max_pool2d(x, 2)
        x = self.b1(x)
        x = x * torch.sigmoid(self.b2(x))
        x = torch.relu(x + self.b3(x))
        return self.fc(torch.flatten(x, 1))


ModelUnderTest = ConvIntoMulAdd().eval()
ModelInputs = (torch.randn(1, 4, 4, 8),)
