"""MLPerf Tiny v1 visual wake words: MobileNetV1, width 0.25, 96x96 RGB, 2 classes (Howard et al. 2017).

A 3x3 stride-2 stem conv, 13 depthwise-separable blocks (3x3 depthwise +
1x1 pointwise, BatchNorm + ReLU6 after each) with the paper's channel and
stride schedule scaled by 0.25, global average pooling and a 2-way classifier.
"""
import torch
import torch.nn as nn

from emlkit.models._blocks import PooledClassifier
from emlkit.models._init import settle_batchnorm, trained_like

torch.manual_seed(0)

# (pointwise output channels at width 1.0, depthwise stride)
SCHEDULE = [(64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2),
            (512, 1), (512, 1), (512, 1), (512, 1), (512, 1), (1024, 2), (1024, 1)]


def _conv_bn(cin: int, cout: int, k: int, stride: int, groups: int = 1) -> list[nn.Module]:
    return [nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False), nn.BatchNorm2d(cout), nn.ReLU6()]


class MobileNetV1(PooledClassifier):
    def __init__(self, width: float = 0.25, classes: int = 2) -> None:
        c = int(32 * width)
        layers = _conv_bn(3, c, 3, 2)
        for out, stride in SCHEDULE:
            o = int(out * width)
            layers += _conv_bn(c, c, 3, stride, groups=c) + _conv_bn(c, o, 1, 1)
            c = o
        super().__init__(layers, c, classes)


ModelUnderTest = trained_like(MobileNetV1())
ModelInputs = (torch.randn(1, 3, 96, 96),)
settle_batchnorm(ModelUnderTest, ModelInputs)
