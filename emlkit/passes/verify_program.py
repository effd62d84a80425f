"""Program verifier, run on the final edge graph of every flow (LowerOptions.program_checks).

Matches nothing and changes nothing: it classifies every non-delegated op of
the final edge program (emlkit.verify.check_program) and stops the compile when
integer data flows into a float kernel (always) or when float islands remain
(unless --allow-float). Its findings go to the report under "verify".

The limits the firmware's op adapters check at load are not restated here: after emission, compile
loads the bundled program with the firmware itself, built for the host (emlkit.verify.check_device_load).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from emlkit import verify
from emlkit.passes.manager import Pass, declare


@declare("check", ("every non-delegated op",), runs_after=("*",), order=330)
@dataclass
class VerifyProgram(Pass):
    allow_float: bool = False
    target: str = "?"
    report_key: str = "verify"
    last: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def create(cls, opts: Any, allow_float: bool) -> "VerifyProgram":
        return cls(allow_float=allow_float)

    def bind(self, target: Any, options: Any) -> None:
        self.target = target.name

    def report(self) -> dict[str, Any]:
        return self.last

    def __call__(self, program: Any) -> None:
        """`program`: the final ExportedProgram (its constants are read), or a bare GraphModule."""
        gm = program if isinstance(program, torch.fx.GraphModule) else program.graph_module
        check = verify.check_program(gm)
        self.last = check.as_dict()
        self.last["warnings"] = verify.enforce(check, self.target, self.allow_float)
