"""Program verifier, run on the final edge graph of every flow (LowerOptions.program_checks).

Matches nothing and changes nothing: it classifies every non-delegated op of
the final edge program (emlkit.verify.check_program) and stops the compile when
integer data flows into a float kernel (always) or when float islands remain
(unless --allow-float). Its findings go to the report under "verify".

It also applies the limits the firmware's op adapters (cortex_m::, aten::, emlkit::) check at
load (emlkit/adapter_limits.py), so a program the device would refuse is refused here with
the device's message; check_memory_plan does the same for the loader's aliasing check on the
emitted (memory-planned) program.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from emlkit import adapter_limits, verify
from emlkit.errors import EXIT_INTERNAL, EXIT_UNSUPPORTED, AotError
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
        constant = adapter_limits.constant_lookup(None if gm is program else program)
        for n in gm.graph.nodes:
            msg = adapter_limits.check_node(n, constant)
            if msg is not None:
                raise AotError(f"the firmware would refuse the program for {self.target} at load: node {n.name} "
                               f"at {verify._source_line(n)}: {msg}; the lowering produced arguments our kernels do "
                               "not take: change that layer or report the model", EXIT_UNSUPPORTED)


def check_memory_plan(program: Any, target: str) -> None:
    """The loader's check that no kernel writes its output over an input, on the emitted program
    (executorch.exir.schema.Program): such a plan is a bug of the toolkit's or ExecuTorch's planning."""
    msg = adapter_limits.check_aliasing(program)
    if msg is not None:
        raise AotError(f"the firmware would refuse the program for {target} at load: {msg}; the memory plan puts a "
                       "kernel's output over its own input (a bug: report the model)", EXIT_INTERNAL)
