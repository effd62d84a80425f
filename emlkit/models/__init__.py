"""The model zoo: one module per model, each defining `ModelUnderTest` and `ModelInputs`.

Each file follows the convention of ExecuTorch's `aot_arm_compiler.py`, so it
can also be passed as a path: module-level `ModelUnderTest` (an nn.Module) and
`ModelInputs` (a tuple of example tensors). Every model seeds torch before it
builds its weights and inputs, so programs and figures are reproducible.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the names and descriptions need no torch: the CLI checks a model name before torch loads
    import torch

# name -> (module, one-line description)
ZOO: dict[str, str] = {
    "add": "elementwise add of two tensors",
    "mul": "elementwise mul of two tensors",
    "conv_relu": "conv 3x3 + ReLU, twice",
    "dw_separable": "depthwise-separable block (dw 3x3 + pw 1x1, ReLU6)",
    "mlp": "three fully connected layers with ReLU",
    "pool": "conv, average pooling and max pooling",
    "softmax": "linear layer followed by softmax",
    "lut_activations": "conv followed by elementwise chains (sigmoid*2+0.5, tanh-0.25)",
    "mobilenet_v2": "MobileNetV2, width 0.35, 96x96 input",
    "conv_hardsigmoid": "conv followed by F.hardsigmoid",
    "relu6_net": "depthwise-separable stack written with F.relu6",
    "scalar_arith": "scalar *, +, -, /, 1 - t and clamp after activations",
    "attention": "single-head self-attention with attn @ v",
    "fc_autoencoder": "fully connected autoencoder (128-64-64-8-64-64-128)",
    "global_avgpool": "conv, ReLU6, AvgPool2d over the whole 8x8 map, linear",
    "branch_concat": "ReLU6, hardsigmoid and hardswish conv branches meeting in a concat",
    "mobilenet_v3_small": "MobileNetV3-Small, width 0.5, 64x64 (hardswish, squeeze-excite)",
    "unet_small": "U-Net, 2 levels, 32x32 (max pool, nearest upsample, skip concat)",
    "conv1d_timeseries": "Conv1d + BatchNorm1d time-series classifier, 8x64 -> 6",
    "transformer_block": "pre-norm transformer encoder block (LayerNorm, 2-head attention, GELU MLP)",
    "gru_kws": "GRU cell unrolled over 8 frames, keyword classes",
    "mlperf_kws_dscnn": "MLPerf Tiny KWS: DS-CNN small, 49x10 MFCC -> 12",
    "mlperf_vww_mobilenet_v1": "MLPerf Tiny VWW: MobileNetV1 0.25, 96x96 -> 2",
    "mlperf_ic_resnet8": "MLPerf Tiny IC: ResNet-8, 32x32 CIFAR-10 -> 10",
    "mlperf_ad_autoencoder": "MLPerf Tiny AD: FC autoencoder 640-128x4-8-128x4-640, BatchNorm1d, batch 4",
    "digits_cnn": "small CNN trained at import on scikit-learn's 8x8 digits (1x8x8 -> 10; emlkit evaluate)",
}
# The newer zoo models (docs/zoo.md); the default suite keeps the original list.
NEW_MODELS = list(ZOO)[list(ZOO).index("branch_concat"):]


@dataclass
class ZooModel:
    name: str
    module: torch.nn.Module
    inputs: tuple[torch.Tensor, ...]
    description: str


def build(name: str) -> ZooModel:
    """Instantiate a zoo model by name (KeyError for unknown names)."""
    if name not in ZOO:
        raise KeyError(name)
    mod = importlib.import_module(f"emlkit.models.{name}")
    return ZooModel(name, mod.ModelUnderTest.eval(), tuple(mod.ModelInputs), ZOO[name])
