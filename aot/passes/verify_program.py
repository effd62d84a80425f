"""Program verifier, run on the final edge graph of every flow (LowerOptions.program_checks).

Matches nothing and changes nothing: it classifies every non-delegated op of
the final edge program (aot.verify.check_program) and stops the compile when
integer data flows into a float kernel (always) or when float islands remain
(unless --allow-float). Its findings go to the report under "verify".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from aot import verify


@dataclass
class VerifyProgram:
    # Declarations read by aot.passes.manager.
    stage = "check"
    targets = ("every non-delegated op",)
    runs_after = ("*",)
    runs_before = ()

    allow_float: bool = False
    target: str = "?"
    report_key: str = "verify"
    last: dict[str, Any] = field(default_factory=dict)

    def set_target(self, target: Any, options: Any) -> None:
        self.target = target.name

    def report(self) -> dict[str, Any]:
        return self.last

    def __call__(self, gm: torch.fx.GraphModule) -> None:
        check = verify.check_program(gm)
        self.last = check.as_dict()
        self.last["warnings"] = verify.enforce(check, self.target, self.allow_float)
