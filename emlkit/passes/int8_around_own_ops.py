"""Quantizer annotation (Cortex-M): the ops our lowerings turn into int8 kernels get a quantize on each side.

Targets, in the graph the quantizer annotates: `prelu` (one slope or one per channel), `adaptive_avg_pool2d` (any
4-D input; the sizes AdaptivePoolAsPool did not turn into plain pools), `adaptive_max_pool2d` whose indices are
unused, floor divisions (`floor_divide`, `div(..., rounding_mode="floor")`) and `embedding_bag` whose other outputs
are unused, all of which ExecuTorch's CortexMQuantizer leaves unannotated.

Why: the quantizer has no pattern for these ops. They were quantized only by their neighbours: a quantize came
from the consumer's input qspec, a dequantize from the producer's output qspec. Where a neighbour is itself
unannotated (one of these ops, or a consumer the quantizer skips) the edge between them stayed float, so no
`dequantize -> op -> quantize` region existed for emlkit_prelu.py, emlkit_adaptive_avg_pool.py,
adaptive_max_on_codes.py, emlkit_floor_divide.py or emlkit_embedding_bag.py to lower: conv -> PReLU(8) ->
{AdaptiveAvgPool2d((3, 5)), ConvTranspose2d} ran gt, mul, where and the pool in float, as did PReLU -> adaptive
pool alone, an adaptive pool -> PReLU, two bags into one `cat`, and computed per-sample weights. And the
quantizer's shared-qparams step (permute, clone, reshape...) runs before these annotations: hardsigmoid ->
permute -> adaptive pool (12 -> 8) left the permute and its copy float, so the hardsigmoid had no quantize
after it and stayed a float op.

What this does:
- before the quantizer's patterns, a bag's values get the int8 per-tensor activation spec as their output (an
  observer of their own, which the quantizer's shared-qparams ops such as `cat` then join), as do its per-sample
  weights' edge;
- after them, a PReLU, adaptive pool or floor division gets that spec on each input edge whose producer has no
  output qspec, and on its output when a reader of it has no input qspec for it (otherwise the neighbours'
  observers are the op's, as before); then the quantizer's shared-qparams step runs again, so the data-movement
  ops left unannotated between such an edge and its producer share its qparams. A one-slope PReLU whose only reader is a unary pointwise op keeps a float
  output: LUT fusion makes one table of both. An adaptive max pool's output shares its input's qparams (a maximum
  does not change the range), as the quantizer does for max_pool2d.
"""

from __future__ import annotations

from typing import Any

import torch
from torchao.quantization.pt2e.quantizer import QuantizationAnnotation, SharedQuantizationSpec
from torchao.quantization.pt2e.quantizer.quantizer import Q_ANNOTATION_KEY

from emlkit.lower.quantizer_steps import WithSteps
from emlkit.passes.graph import (EMBEDDING_BAGS, UNARY_OPS, QuantizerHook, annotate_bags, const_tensor, matched_key,
                                 values_output)
from emlkit.passes.manager import declare

aten = torch.ops.aten

PRELU = (aten.prelu.default,)
ADAPTIVE_AVG = (aten.adaptive_avg_pool2d.default, aten._adaptive_avg_pool2d.default)
ADAPTIVE_MAX = (aten.adaptive_max_pool2d.default,)
FLOOR_DIV = (aten.floor_divide.default, aten.div.Tensor_mode)  # the latter with rounding_mode="floor"


def _output_qspec(n: torch.fx.Node) -> object:
    ann = n.meta.get(Q_ANNOTATION_KEY)
    return None if ann is None else ann.output_qspec


def _reads_int8(user: torch.fx.Node, n: torch.fx.Node) -> bool:
    ann = user.meta.get(Q_ANNOTATION_KEY)
    return ann is not None and n in ann.input_qspec_map


def _value_node(n: torch.fx.Node) -> torch.fx.Node | None:
    """The node carrying N's value: N, or for an adaptive max pool or a bag the getitem of its values (None when
    another output is read: the lowerings do not take those)."""
    return n if n.target not in ADAPTIVE_MAX + EMBEDDING_BAGS else values_output(n)


def _fused_by_lut(gm: torch.fx.GraphModule, n: torch.fx.Node) -> bool:
    """A one-slope PReLU whose only reader is a unary pointwise op of it alone: LUT fusion makes one table of both.
    (Narrower than what LUT fusion chains: any other reader gets the PReLU an output of its own, two tables.)"""
    users, w = list(n.users), const_tensor(gm, n.args[1])
    if len(users) != 1 or w is None or w.numel() != 1:
        return False
    u = users[0]
    schema = getattr(u.target, "_schema", None)
    return (u.op == "call_function" and u.target in UNARY_OPS and u.target is not aten.gelu.default
            and schema is not None and not schema.is_mutable and u.all_input_nodes == [n])


def _float_inputs(n: torch.fx.Node) -> list[torch.fx.Node]:
    """The computed float tensors the op reads as values (a floor division's both operands; the others' first
    input). Constants are left alone: a divisor constant stays exact (emlkit_floor_divide.py takes it as a scalar),
    where an observer would round it to int8."""
    args = n.args[:2] if n.target in FLOOR_DIV else n.args[:1]
    return [a for a in args if isinstance(a, torch.fx.Node) and a.op != "get_attr"
            and isinstance(a.meta.get("val"), torch.Tensor) and a.meta["val"].dtype.is_floating_point]


def _is_floor_division(n: torch.fx.Node) -> bool:
    return n.target is aten.floor_divide.default or (
        n.target is aten.div.Tensor_mode and n.kwargs.get("rounding_mode") == "floor")


def annotate_own_ops(model: torch.fx.GraphModule, record: list[str]) -> None:
    from executorch.backends.cortex_m.quantizer.quantization_configs import INT8_ACTIVATION_PER_TENSOR_QSPEC

    qspec, key, before = INT8_ACTIVATION_PER_TENSOR_QSPEC, matched_key(), len(record)
    for n in list(model.graph.nodes):  # in order: a producer's output qspec is settled before its readers look
        if n.op != "call_function" or n.target not in PRELU + ADAPTIVE_AVG + ADAPTIVE_MAX + FLOOR_DIV:
            continue
        xs, out = _float_inputs(n), _value_node(n)
        if n.meta.get(Q_ANNOTATION_KEY) is not None or out is None or not xs \
                or (n.target in FLOOR_DIV and not _is_floor_division(n)):
            continue
        # The max pool's output shares its input edge's observer (given in any case: implicit sharing makes it the
        # producer's when that has one).
        edges = {x: qspec for x in xs if _output_qspec(x) is None or n.target in ADAPTIVE_MAX}
        out_spec = SharedQuantizationSpec((xs[0], n)) if n.target in ADAPTIVE_MAX else qspec
        float_readers = [u for u in out.users if not _reads_int8(u, out)]
        give_out = bool(float_readers) and not (n.target in PRELU and _fused_by_lut(model, n))
        if not edges and not give_out:
            continue
        if out is n:
            n.meta[Q_ANNOTATION_KEY] = QuantizationAnnotation(edges, out_spec if give_out else None, _annotated=True)
        else:
            n.meta[Q_ANNOTATION_KEY] = QuantizationAnnotation(edges, None, _annotated=True)
            if give_out:
                out.meta[Q_ANNOTATION_KEY] = QuantizationAnnotation({}, out_spec, _annotated=True)
                out.meta[key] = True
        n.meta[key] = True
        record.append(n.name)
    if len(record) > before:
        share_through_data_movement(model)


def share_through_data_movement(model: torch.fx.GraphModule) -> None:
    """The quantizer's shared-qparams step again, now that the ops above have qspecs: its first run found no
    quantized neighbour for the data-movement ops between them and a float producer (a permute and its
    channels-last copy after a hardsigmoid) and left them float, so no quantize followed the producer.
    Annotated nodes are skipped, so the clusters it settled before stay as they were."""
    from executorch.backends.arm.quantizer.arm_quantizer_utils import SharedQspecQuantizer

    SharedQspecQuantizer().annotate(model)


@declare("quantizer_hook", ("aten.prelu", "aten.adaptive_avg_pool2d", "aten.adaptive_max_pool2d",
                            "aten.embedding_bag", "aten.floor_divide", "aten.div"), order=168, flows=("cortex_m",))
class Int8AroundOwnOps(QuantizerHook):
    report_name = "annotated"

    def configure(self, quantizer: Any, target: Any) -> Any:
        return WithSteps(quantizer, before=lambda m: annotate_bags(m, self.done),
                         after=lambda m: annotate_own_ops(m, self.done))
