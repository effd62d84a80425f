"""A target's quantizer with our own annotation steps run before and/or after its own.

Quantizer hooks (LowerOptions.quantizer_hooks) wrap the target's quantizer in
`WithSteps`: its graph transforms and validation are the inner quantizer's,
unchanged; `annotate` runs `before(model)`, the inner quantizer, then
`after(model)`. A step that runs before can claim nodes (annotate them and
mark them matched) so the inner quantizer's pattern matcher leaves them
alone; a step that runs after can adjust the annotations the inner one wrote.
`hide(model)` runs before the inner quantizer's graph transform and returns
the step that undoes it after (a hook can keep nodes from that transform).
"""

from __future__ import annotations

from typing import Any, Callable

import torch
from torchao.quantization.pt2e.quantizer import Quantizer

Step = Callable[[torch.fx.GraphModule], None]
Hide = Callable[[torch.fx.GraphModule], Step]


class WithSteps(Quantizer):
    def __init__(self, inner: Any, before: Step | None = None, after: Step | None = None,
                 hide: Hide | None = None) -> None:
        super().__init__()
        self.inner, self.before, self.after, self.hide = inner, before, after, hide

    def transform_for_annotation(self, model: torch.fx.GraphModule) -> torch.fx.GraphModule:
        if self.hide is None:
            return self.inner.transform_for_annotation(model)
        restore = self.hide(model)
        model = self.inner.transform_for_annotation(model)
        restore(model)
        return model

    def annotate(self, model: torch.fx.GraphModule) -> torch.fx.GraphModule:
        if self.before is not None:
            self.before(model)
        model = self.inner.annotate(model) or model
        if self.after is not None:
            self.after(model)
        return model

    def validate(self, model: torch.fx.GraphModule) -> None:
        return self.inner.validate(model)


def innermost(quantizer: Any) -> Any:
    """The target's own quantizer under any WithSteps wrappers (its set_module_name etc. live there)."""
    while isinstance(quantizer, WithSteps):
        quantizer = quantizer.inner
    return quantizer
