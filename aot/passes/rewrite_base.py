"""Shared shell of our graph-rewrite passes: on only for some targets, and a report of what each run rewrote."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch


@dataclass
class TargetedRewrite:
    """`set_target` (in the subclass) sets `active`; `run` rewrites and appends an entry per rewrite to `rewritten`."""

    active: bool = False
    rewritten: list[dict[str, Any]] = field(default_factory=list)

    def report(self) -> dict[str, Any]:
        return {"rewritten": list(self.rewritten)}

    def __call__(self, gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
        self.rewritten = []  # the report is of this run only
        return self.run(gm) if self.active else gm

    def run(self, gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
        raise NotImplementedError
