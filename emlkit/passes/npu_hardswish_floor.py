"""Quantizer annotation (Ethos-U): a tensor that only feeds hardswish is observed from -3 up.

Targets, in the graph the Arm quantizer annotates: the producer of an `aten.hardswish` input (a conv, a
Linear, an add, ...) when the hardswish is its only user and its output has an observer of its own.

Why: hardswish(x) is 0 for every x <= -3, so the int8 codes the producer spends below -3 all give the same
answer. ExecuTorch's Cortex-M flow knows this (its ClampHardswishPass clamps the input at -3 before
quantization); the Arm quantizer observes the producer's whole range. On the zoo's mobilenet_v3_small the
NPU's hardswish inputs got steps up to 1.9x the CPU's (0.094 against 0.051 in the first block with
hardswish), and the NPU fell 0.7 dB behind the CPU from that block on.

What this does: after the Arm quantizer has annotated the graph, the producer's output qspec (and the
hardswish's input qspec for it) gets the same observer class with its input clamped at -3 before it is
observed. The conv's int8 output then saturates at about -3, where hardswish is 0 anyway, so the float
model is unchanged and its quantization finer.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import torch
from torchao.quantization.pt2e.observer import ObserverBase, PartialWrapper
from torchao.quantization.pt2e.quantizer import QuantizationSpec

from emlkit.passes.graph import QuantizerHook, retype_edge
from emlkit.passes.manager import declare

aten = torch.ops.aten
HARDSWISH = (aten.hardswish.default, aten.hardswish_.default)
FLOOR = -3.0  # hardswish(x) = x * relu6(x + 3) / 6 is 0 from here down


@functools.cache
def floored(cls: type) -> type:
    """CLS (an observer class) observing its input clamped from below at `floor`."""

    def __init__(self: Any, *args: Any, floor: float = FLOOR, **kwargs: Any) -> None:
        cls.__init__(self, *args, **kwargs)
        self.floor = floor

    def forward(self: Any, x: torch.Tensor) -> torch.Tensor:
        cls.forward(self, x.detach().clamp(min=self.floor))
        return x

    return type(f"Floored{cls.__name__}", (cls,), {"__init__": __init__, "forward": forward})


def floored_spec(qspec: Any) -> QuantizationSpec | None:
    """QSPEC with its observer floored at -3, or None if it is not a plain observer spec we can floor."""
    if not isinstance(qspec, QuantizationSpec) or qspec.is_dynamic:
        return None
    ctr = qspec.observer_or_fake_quant_ctr
    p = getattr(ctr, "p", None)
    if not (isinstance(ctr, PartialWrapper) and isinstance(p, functools.partial) and isinstance(p.func, type)
            and issubclass(p.func, ObserverBase) and not p.args):
        return None
    return dataclasses.replace(qspec, observer_or_fake_quant_ctr=floored(p.func).with_args(**p.keywords))


def floor_inputs(model: torch.fx.GraphModule, record: list[str]) -> None:
    for hs in list(model.graph.nodes):
        if hs.op != "call_function" or hs.target not in HARDSWISH or not hs.args:
            continue
        src = hs.args[0]
        if not isinstance(src, torch.fx.Node) or len(src.users) != 1:
            continue  # another user would see the clipped values
        # Only where both ends share one plain observer spec: that observer is the one floored.
        if retype_edge(src, hs, lambda out, inp: floored_spec(out) if inp == out else None):
            record.append(src.name)


@declare("quantizer_hook", ("aten.hardswish",), runs_after=("Int8MatmulOnU55",), order=180, flows=("ethos_u",))
class NpuHardswishFloor(QuantizerHook):
    report_name = "floored"
    after_annotation = floor_inputs
