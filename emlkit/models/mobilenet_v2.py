"""MobileNetV2 (width 0.35, 96x96 input), written here because torchvision is unavailable.

Follows the architecture of Sandler et al. 2018: a stem conv, 17 inverted
residual blocks (expand 1x1, depthwise 3x3, project 1x1, residual when the
shape allows), a final 1x1 conv to 1280 channels, global pooling and a classifier.
"""
import torch
import torch.nn as nn

from emlkit.models._init import settle_batchnorm

torch.manual_seed(0)


def _make_divisible(v: float, divisor: int = 8) -> int:
    new_v = max(divisor, int(v + divisor / 2) // divisor * divisor)
    if new_v < 0.9 * v:
        new_v += divisor
    return new_v


def _conv_bn(cin: int, cout: int, k: int, stride: int, groups: int = 1, act: bool = True) -> nn.Sequential:
    layers: list[nn.Module] = [
        nn.Conv2d(cin, cout, k, stride, (k - 1) // 2, groups=groups, bias=False),
        nn.BatchNorm2d(cout),
    ]
    if act:
        layers.append(nn.ReLU6())
    return nn.Sequential(*layers)


class InvertedResidual(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, expand: int) -> None:
        super().__init__()
        hidden = cin * expand
        self.use_res = stride == 1 and cin == cout
        layers: list[nn.Module] = []
        if expand != 1:
            layers.append(_conv_bn(cin, hidden, 1, 1))
        layers += [_conv_bn(hidden, hidden, 3, stride, groups=hidden), _conv_bn(hidden, cout, 1, 1, act=False)]
        self.block = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.block(x)
        return x + y if self.use_res else y


class MobileNetV2(nn.Module):
    # (expansion, channels, repeats, first stride)
    SETTINGS = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]

    def __init__(self, width: float = 0.35, num_classes: int = 1000) -> None:
        super().__init__()
        cin = _make_divisible(32 * width)
        last = _make_divisible(1280 * max(1.0, width))
        layers: list[nn.Module] = [_conv_bn(3, cin, 3, 2)]
        for t, c, n, s in self.SETTINGS:
            cout = _make_divisible(c * width)
            for i in range(n):
                layers.append(InvertedResidual(cin, cout, s if i == 0 else 1, t))
                cin = cout
        layers.append(_conv_bn(cin, last, 1, 1))
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(last, num_classes)
        for m in self.modules():
            if isinstance(m, nn.BatchNorm2d):
                # Non-trivial statistics so folding and quantization are exercised.
                nn.init.uniform_(m.weight, 0.5, 1.5)
                nn.init.uniform_(m.bias, -0.1, 0.1)
                m.running_mean.uniform_(-0.1, 0.1)
                m.running_var.uniform_(0.5, 1.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(self.features(x))
        return self.classifier(torch.flatten(x, 1))


ModelUnderTest = MobileNetV2().eval()
ModelInputs = (torch.rand(1, 3, 96, 96) * 2 - 1,)
settle_batchnorm(ModelUnderTest, ModelInputs)
