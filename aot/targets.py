"""One table: target name -> CPU, lowering flow and backend options."""

from __future__ import annotations

from dataclasses import dataclass, field

from aot.errors import AotError


@dataclass(frozen=True)
class Target:
    name: str
    flow: str                      # "cortex_m" (no delegate) or "ethos_u" (Vela delegate)
    cpu: str                       # CPU that runs the non-delegated ops
    default_board: str
    npu: str | None = None         # Ethos-U accelerator config given to Vela
    vela_flags: tuple[str, ...] = field(default_factory=tuple)
    activation_bits: int = 8       # 16: int16 activations, int8 weights (Arm's A16W8 quantization config)


TARGETS: dict[str, Target] = {
    t.name: t
    for t in [
        Target("cortex-m55", "cortex_m", "cortex-m55", "corstone-300"),
        Target("cortex-m85", "cortex_m", "cortex-m85", "corstone-320"),
        Target("ethos-u55-128", "ethos_u", "cortex-m55", "corstone-300", npu="ethos-u55-128"),
        Target("ethos-u55-128-a16w8", "ethos_u", "cortex-m55", "corstone-300", npu="ethos-u55-128",
               activation_bits=16),
        Target("ethos-u55-256", "ethos_u", "cortex-m55", "corstone-300", npu="ethos-u55-256"),
        Target("ethos-u65-256", "ethos_u", "cortex-m55", "corstone-300", npu="ethos-u65-256"),
        Target("ethos-u85-256", "ethos_u", "cortex-m85", "corstone-320", npu="ethos-u85-256"),
    ]
}


def get_target(name: str) -> Target:
    try:
        return TARGETS[name]
    except KeyError:
        raise AotError(f"unknown target '{name}': choose one of {', '.join(TARGETS)}") from None
