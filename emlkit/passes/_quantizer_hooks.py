"""What the quantizer hooks (LowerOptions.quantizer_hooks) share: the call contract, the report and
annotating an op on its own.

A hook is called with the target's quantizer before annotation and returns the quantizer to use.
Each hook applies to one flow only and reports what its last call changed.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar

import torch
from torchao.quantization.pt2e.quantizer import QuantizationAnnotation
from torchao.quantization.pt2e.quantizer.quantizer import Q_ANNOTATION_KEY

from emlkit.lower.quantizer_steps import WithSteps
from emlkit.passes.manager import Pass, applies_to

log = logging.getLogger(__name__)


@dataclass
class QuantizerHook(Pass):
    """Base of the hooks (an adapter: ExecuTorch's quantizer is wrapped, not a graph rewritten):
    `configure` runs only for targets the declaration covers (emlkit/passes/manager.py) and records in
    `done`, which the report lists under `report_name`."""

    report_key: str = ""
    done: list[str] = field(default_factory=list)
    report_name: ClassVar[str] = "done"
    flows: ClassVar[tuple[str, ...]] = ("cortex_m",)  # an undeclared hook: the Cortex-M flow's quantizer

    def report(self) -> dict[str, Any]:
        return {self.report_name: list(self.done)}

    def applies(self, target: Any, options: Any = None) -> bool:
        return applies_to(type(self), target, options)

    def configure(self, quantizer: Any, target: Any) -> Any:
        raise NotImplementedError

    def __call__(self, quantizer: Any, target: Any, options: Any) -> Any:
        self.done = []
        if not self.applies(target, options):
            return quantizer
        return self.configure(quantizer, target)


def matched_key() -> str:
    """The pattern matcher's key for "already annotated"; a public class attribute of ExecuTorch's
    PatternMatcher, read from it so a rename there fails loudly here."""
    from executorch.backends.cortex_m.quantizer.pattern_matcher import PatternMatcher

    return PatternMatcher.Q_PATTERN_MATCHED_KEY


def retype_edge(src: torch.fx.Node, user: torch.fx.Node, new: Callable[[Any, Any], Any]) -> bool:
    """Give the edge SRC -> USER the qspec `new(SRC's output qspec, USER's input qspec for SRC)` on both of
    its ends (one observer); False, and nothing changed, if either end is not annotated or `new` gives None."""
    out_ann, in_ann = src.meta.get(Q_ANNOTATION_KEY), user.meta.get(Q_ANNOTATION_KEY)
    if out_ann is None or out_ann.output_qspec is None or in_ann is None or src not in in_ann.input_qspec_map:
        return False
    spec = new(out_ann.output_qspec, in_ann.input_qspec_map[src])
    if spec is None:
        return False
    out_ann.output_qspec = spec
    in_ann.input_qspec_map[src] = spec
    return True


Candidates = Callable[[torch.fx.GraphModule], list[torch.fx.Node]]


def annotate_alone(model: torch.fx.GraphModule, candidates: Candidates, record: list[str], what: str,
                   mark: tuple[str, ...] = ()) -> None:
    """Annotate each candidate op on its own before the Cortex-M pattern quantizers run.

    Its first input and its output get the quantizer's int8 per-tensor activation spec (an observer
    of its own) and it is marked as matched, so no pattern fuses it with its producer; `mark` names
    extra meta flags set on it for later passes.
    """
    from executorch.backends.cortex_m.quantizer.quantization_configs import INT8_ACTIVATION_PER_TENSOR_QSPEC

    qspec, key = INT8_ACTIVATION_PER_TENSOR_QSPEC, matched_key()
    for n in candidates(model):
        n.meta[Q_ANNOTATION_KEY] = QuantizationAnnotation({n.args[0]: qspec}, qspec, _annotated=True)
        n.meta[key] = True
        for flag in mark:
            n.meta[flag] = True
        record.append(n.name)
    if record:
        log.debug("%s: %s", what, ", ".join(record))


def annotating_alone(quantizer: Any, candidates: Candidates, record: list[str], what: str,
                     mark: tuple[str, ...] = ()) -> Any:
    """`quantizer` with `annotate_alone` run before its own steps."""
    return WithSteps(quantizer, before=lambda m: annotate_alone(m, candidates, record, what, mark))
