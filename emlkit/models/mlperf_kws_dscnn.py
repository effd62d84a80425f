"""MLPerf Tiny v1 keyword spotting: DS-CNN (small), after Zhang et al. 2017, "Hello Edge".

Input: 49 frames x 10 MFCC features (1 channel). A 10x4 conv (stride 2) to 64
channels, four depthwise-separable blocks (3x3 depthwise + 1x1 pointwise, 64
channels, BatchNorm + ReLU after each), global average pooling and a
fully connected layer to the 12 keyword classes.
"""
import torch
import torch.nn as nn

from emlkit.models._blocks import PooledClassifier
from emlkit.models._init import settle_batchnorm, trained_like

torch.manual_seed(0)


def _bn_relu(c: int) -> list[nn.Module]:
    return [nn.BatchNorm2d(c), nn.ReLU()]


class DsCnn(PooledClassifier):
    def __init__(self, channels: int = 64, blocks: int = 4, classes: int = 12) -> None:
        layers: list[nn.Module] = [nn.Conv2d(1, channels, (10, 4), stride=2, padding=(5, 1), bias=False),
                                   *_bn_relu(channels)]
        for _ in range(blocks):
            layers += [nn.Conv2d(channels, channels, 3, padding=1, groups=channels, bias=False), *_bn_relu(channels),
                       nn.Conv2d(channels, channels, 1, bias=False), *_bn_relu(channels)]
        super().__init__(layers, channels, classes)


ModelUnderTest = trained_like(DsCnn())
ModelInputs = (torch.randn(1, 1, 49, 10),)
settle_batchnorm(ModelUnderTest, ModelInputs)
