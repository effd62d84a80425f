"""MobileNetV3-Small (Howard et al. 2019), width 0.5, 64x64 input, 10 classes.

A 3x3 stride-2 stem conv with hardswish, the paper's 11 bottleneck blocks
(expand 1x1, depthwise 3x3 or 5x5, optional squeeze-excite with a hardsigmoid
gate, project 1x1; ReLU or hardswish per the paper's table; residual when the
shape allows), a 1x1 conv with hardswish, global average pooling, a hidden
Linear + hardswish and the classifier.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

from emlkit.models._init import settle_batchnorm, trained_like

torch.manual_seed(0)

# kernel, expansion size, output channels, squeeze-excite, hardswish, stride (width 1.0)
BLOCKS = [(3, 16, 16, True, False, 2), (3, 72, 24, False, False, 2), (3, 88, 24, False, False, 1),
          (5, 96, 40, True, True, 2), (5, 240, 40, True, True, 1), (5, 240, 40, True, True, 1),
          (5, 120, 48, True, True, 1), (5, 144, 48, True, True, 1), (5, 288, 96, True, True, 2),
          (5, 576, 96, True, True, 1), (5, 576, 96, True, True, 1)]


def _div8(v: float) -> int:
    return max(8, int(v + 4) // 8 * 8)


class SqueezeExcite(nn.Module):
    def __init__(self, c: int) -> None:
        super().__init__()
        self.reduce = nn.Conv2d(c, _div8(c / 4), 1)
        self.expand = nn.Conv2d(_div8(c / 4), c, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = F.adaptive_avg_pool2d(x, 1)
        s = F.hardsigmoid(self.expand(F.relu(self.reduce(s))))
        return x * s


class Bneck(nn.Module):
    def __init__(self, cin: int, k: int, exp: int, cout: int, se: bool, hs: bool, stride: int) -> None:
        super().__init__()
        act = nn.Hardswish if hs else nn.ReLU
        layers: list[nn.Module] = []
        if exp != cin:
            layers += [nn.Conv2d(cin, exp, 1, bias=False), nn.BatchNorm2d(exp), act()]
        layers += [nn.Conv2d(exp, exp, k, stride, k // 2, groups=exp, bias=False), nn.BatchNorm2d(exp), act()]
        if se:
            layers.append(SqueezeExcite(exp))
        layers += [nn.Conv2d(exp, cout, 1, bias=False), nn.BatchNorm2d(cout)]
        self.block = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.block(x)
        return x + y if self.residual else y


class MobileNetV3Small(nn.Module):
    def __init__(self, width: float = 0.5, classes: int = 10) -> None:
        super().__init__()
        c = _div8(16 * width)
        layers: list[nn.Module] = [nn.Conv2d(3, c, 3, 2, 1, bias=False), nn.BatchNorm2d(c), nn.Hardswish()]
        for k, exp, out, se, hs, s in BLOCKS:
            o = _div8(out * width)
            layers.append(Bneck(c, k, _div8(exp * width), o, se, hs, s))
            c = o
        last = _div8(576 * width)
        layers += [nn.Conv2d(c, last, 1, bias=False), nn.BatchNorm2d(last), nn.Hardswish()]
        self.features = nn.Sequential(*layers)
        self.head = nn.Sequential(nn.Linear(last, 256), nn.Hardswish(), nn.Linear(256, classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.flatten(F.adaptive_avg_pool2d(self.features(x), 1), 1))


ModelUnderTest = trained_like(MobileNetV3Small())
ModelInputs = (torch.randn(1, 3, 64, 64),)
settle_batchnorm(ModelUnderTest, ModelInputs)
