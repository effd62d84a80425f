"""What a compiled program asks the firmware's runner for (board-independent).

Written by `compile` into the report ("program_needs"); the fit check (emlkit/deploy/fit.py) sets it
against a board's memories. The counts come from the firmware's own loader, run on the host
(emlkit.hostfw), so compiling needs nothing from emlkit.deploy and no firmware rule is restated here.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from emlkit import hostfw

# Element sizes of ExecuTorch's ScalarType codes (executorch/exir/scalar_type.py).
_ELEMENT_BYTES = {0: 1, 1: 1, 2: 2, 3: 4, 4: 8, 5: 2, 6: 4, 7: 8, 11: 1, 15: 2}


@dataclass
class ProgramNeeds:
    """The memory a program asks the runner for, as the firmware's loader counts it (board-independent)."""

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
        """The runtime memory on a build with these struct sizes (firmware/runtime/method.c et_runtime_bytes)."""
        return hostfw.runtime_bytes(asdict(self), layout)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "ProgramNeeds":
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})

    @classmethod
    def from_program(cls, prog: Any, pte: bytes) -> "ProgramNeeds":
        """From a program's bytes (.pte) as the firmware's loader reads them (emlkit.hostfw.program_needs), and its
        ExecuTorch form (executorch.exir.schema.Program) for the outputs' sizes."""
        from executorch.exir.schema import Tensor

        counts = hostfw.program_needs(pte)
        plan = prog.execution_plan[0]
        out = 0
        for idx in plan.outputs:
            v = plan.values[idx].val
            if isinstance(v, Tensor):
                n = 1
                for s in v.sizes:
                    n *= int(s)
                out += n * _ELEMENT_BYTES.get(int(v.scalar_type), 8)
        return cls(arenas=[int(a) for a in counts["arenas"]], values=int(counts["values"]),
                   tensors=int(counts["tensors"]), operators=int(counts["operators"]),
                   instructions=int(counts["instructions"]), arguments=int(counts["arguments"]), output_bytes=out,
                   kernel_state=int(counts["kernel_state"]))
