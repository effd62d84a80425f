"""What a compiled program asks the firmware's runner for, read off the program (board-independent).

Written by `compile` into the report ("program_needs"); the fit check (emlkit/deploy/fit.py) sets it
against a board's memories. Only the program and the firmware's operator registry (listed by its host
build, emlkit.hostfw) are read here, so compiling needs nothing from emlkit.deploy.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from emlkit import hostfw

RUNTIME_ALIGN = 8      # firmware/runtime/method.c ALIGN: each runtime table is rounded up to it
# Element sizes of ExecuTorch's ScalarType codes (executorch/exir/scalar_type.py).
_ELEMENT_BYTES = {0: 1, 1: 1, 2: 2, 3: 4, 4: 8, 5: 2, 6: 4, 7: 8, 11: 1, 15: 2}


def state_bytes() -> dict[tuple[str, str], int]:
    """Per-call state bytes of each operator, from the firmware's own registry (emlkit.hostfw): the firmware's
    runtime memory holds that much per kernel call of the operator (firmware/runtime/method.c)."""
    return hostfw.registry_state_bytes()


@dataclass
class ProgramNeeds:
    """The memory a program asks the runner for, read off the program (board-independent)."""

    arenas: list[int]           # planned arena bytes, memory ids 1..n
    values: int
    tensors: int
    operators: int
    instructions: int
    arguments: int
    output_bytes: int
    delegate_bytes: int = 0     # device memory for delegates (Ethos-U scratch); not predicted here
    kernel_state: int = 0       # the kernel calls' load-time state (registry state bytes, each rounded up)

    def runtime_bytes(self, layout: dict[str, int]) -> int:
        """firmware/runtime/method.c runtime_bytes() with this build's struct sizes."""
        def up(n: int) -> int:
            return (n + RUNTIME_ALIGN - 1) // RUNTIME_ALIGN * RUNTIME_ALIGN

        return (up(layout["et_value"] * self.values) + up(layout["et_tensor"] * self.tensors)
                + up(layout["et_op_slot"] * self.operators) + up(layout["et_instr"] * self.instructions)
                + up(layout["pointer"] * self.arguments) + self.kernel_state)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "ProgramNeeds":
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})

    @classmethod
    def from_program(cls, prog: Any) -> "ProgramNeeds":
        """From an ExecuTorch Program (executorch.exir.schema), e.g. manager.executorch_program."""
        from executorch.exir.schema import DelegateCall, KernelCall, Tensor

        plan = prog.execution_plan[0]
        tensors = sum(1 for v in plan.values if isinstance(v.val, Tensor))
        instrs = [i for c in plan.chains for i in c.instructions]
        args = sum(len(i.instr_args.args) for i in instrs if isinstance(i.instr_args, (KernelCall, DelegateCall)))
        out = 0
        for idx in plan.outputs:
            v = plan.values[idx].val
            if isinstance(v, Tensor):
                n = 1
                for s in v.sizes:
                    n *= int(s)
                out += n * _ELEMENT_BYTES.get(int(v.scalar_type), 8)
        per_call = state_bytes()
        state = 0
        for i in instrs:
            if isinstance(i.instr_args, KernelCall):
                o = plan.operators[i.instr_args.op_index]
                state += -(-per_call.get((o.name, o.overload), 0) // RUNTIME_ALIGN) * RUNTIME_ALIGN
        return cls(arenas=[int(s) for s in plan.non_const_buffer_sizes[1:]], values=len(plan.values), tensors=tensors,
                   operators=len(plan.operators), instructions=len(instrs), arguments=args, output_bytes=out,
                   kernel_state=state)
