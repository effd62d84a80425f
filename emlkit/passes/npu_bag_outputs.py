"""Quantizer annotation (Ethos-U, int8): an embedding bag's values get an int8 output of their own.

Targets, in the graph the Arm quantizer annotates: `embedding_bag` (every overload) whose other outputs are
unused, and its float per-sample weights' edge (graph.annotate_bags, as int8_around_own_ops.py has the Cortex-M
quantizer do).

Why: neither the Arm quantizer nor the NPU takes `embedding_bag`. A bag whose reader quantizes its input (a Linear,
the model's output) gets a quantize from that reader, but bags into a `cat` got none: the cat shares its inputs'
qparams and neither input has any. The bags then stayed on the CPU as float ops on float32 tables, and
emlkit_embedding_bag.py, which the flow runs on what the partitioner leaves on the CPU (manager.CPU_SIDE), had no
int8 output to lower them to (tests/models/embedding_bag_head.py).

What this does: before the Arm quantizer's own annotation, each bag's values get the int8 per-tensor activation
spec (an observer of their own), as do its float per-sample weights. The partitioner still leaves the bag on the
CPU, now before a quantize, where emlkit::embedding_bag takes it; a reader on the NPU gets int8 codes.
"""

from __future__ import annotations

from typing import Any

from emlkit.lower.quantizer_steps import WithSteps
from emlkit.passes.graph import QuantizerHook, annotate_bags
from emlkit.passes.manager import declare


@declare("quantizer_hook", ("aten.embedding_bag", "aten._embedding_bag"), order=182, flows=("ethos_u",),
         bits=("int8",))
class NpuBagOutputs(QuantizerHook):
    report_name = "annotated"

    def configure(self, quantizer: Any, target: Any) -> Any:
        return WithSteps(quantizer, before=lambda m: annotate_bags(m, self.done))
