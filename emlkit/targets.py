"""One table: target name -> CPU, lowering flow and backend options."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from emlkit.errors import AotError


@dataclass(frozen=True)
class Target:
    name: str
    flow: str                      # "cortex_m" (no delegate) or "ethos_u" (Vela delegate)
    cpu: str                       # CPU that runs the non-delegated ops
    default_board: str
    npu: str | None = None         # Ethos-U accelerator config given to Vela
    vela_flags: tuple[str, ...] = field(default_factory=tuple)
    activation_bits: int = 8       # 16: int16 activations, int8 weights (Arm's A16W8 quantization config)
    # Boards the suite runs this target on; the first is default_board. More than one where the
    # target's own machine is too small for most models and a stand-in runs the same code.
    suite_boards: tuple[str, ...] = ()
    # Vela's system config and memory mode (--system-config, --memory-mode; None: ExecuTorch's default for the NPU).
    system_config: str | None = None
    memory_mode: str | None = None

    @property
    def boards(self) -> tuple[str, ...]:
        return self.suite_boards or (self.default_board,)

    @property
    def isa(self) -> str:
        """Kernel ISA the CPU offers, as ExecuTorch's Cortex-M backend sees it: "MVE", "DSP" or "SCALAR".
        It picks what the lowering emits (e.g. kernel sums for MVE fully connected layers, bias otherwise)."""
        from executorch.backends.cortex_m.target_config import CortexMTargetConfig

        return CortexMTargetConfig.from_target_string(self.cpu).backend.name


def _npu_target(name: str) -> Target:
    """An Ethos-U target: U55/U65 beside a Cortex-M55 on Corstone-300, U85 beside a Cortex-M85 on Corstone-320;
    a name ending in -a16w8 has int16 activations."""
    npu = name.removesuffix("-a16w8")
    u85 = npu.startswith("ethos-u85")
    return Target(name, "ethos_u", "cortex-m85" if u85 else "cortex-m55", "corstone-320" if u85 else "corstone-300",
                  npu=npu, activation_bits=16 if name != npu else 8)


TARGETS: dict[str, Target] = {
    t.name: t
    for t in [
        Target("cortex-m55", "cortex_m", "cortex-m55", "corstone-300"),
        Target("cortex-m85", "cortex_m", "cortex-m85", "corstone-320"),
        # Cores without MVE: DSP extension (M4, M7, M33) or neither (M0+, M3). QEMU 7.2's only
        # Armv6-M machine is the 16 KiB micro:bit; an385-m0plus runs the same Armv6-M image on
        # the AN385's Cortex-M3 with its memory (boards/README.md).
        Target("cortex-m0plus", "cortex_m", "cortex-m0plus", "microbit", suite_boards=("microbit", "an385-m0plus")),
        Target("cortex-m3", "cortex_m", "cortex-m3", "mps2-an385"),
        Target("cortex-m4", "cortex_m", "cortex-m4", "mps2-an386"),
        Target("cortex-m7", "cortex_m", "cortex-m7", "mps2-an500"),
        Target("cortex-m33", "cortex_m", "cortex-m33", "mps2-an505"),
        *(_npu_target(name) for name in (
            "ethos-u55-128", "ethos-u55-128-a16w8", "ethos-u55-32", "ethos-u55-64", "ethos-u55-256", "ethos-u65-256",
            "ethos-u65-512", "ethos-u85-256", "ethos-u85-256-a16w8", "ethos-u85-128", "ethos-u85-512", "ethos-u85-1024",
            "ethos-u85-2048")),
    ]
}


def with_vela_config(target: Target, system_config: str | None, memory_mode: str | None) -> Target:
    """TARGET compiled with Vela's SYSTEM_CONFIG and MEMORY_MODE (None: ExecuTorch's default), both checked against
    the vela.ini ExecuTorch's Arm flow uses; AotError (exit 2) naming the accepted values otherwise."""
    if system_config is None and memory_mode is None:
        return target
    if target.npu is None:
        raise AotError(f"--system-config and --memory-mode are Vela options for Ethos-U targets; {target.name} has no "
                       "NPU: drop them or pick an ethos-u target")
    from emlkit.vela_ini import resolve

    sys_cfg, mode = resolve(target.npu, system_config, memory_mode)
    return replace(target, system_config=sys_cfg, memory_mode=mode)


def get_target(name: str) -> Target:
    try:
        return TARGETS[name]
    except KeyError:
        raise AotError(f"unknown target '{name}': choose one of {', '.join(TARGETS)}") from None
