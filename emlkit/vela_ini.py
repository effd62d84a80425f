"""Vela's system configurations and memory modes, as ExecuTorch's Arm flow hands them to Vela.

ExecuTorch's EthosUCompileSpec passes `--config=Arm/vela.ini` (the file shipped in Vela's config_files
folder), `--system-config` and `--memory-mode`, with per-NPU defaults when they are not given. This module
reads that file to check a choice before the compile starts, with the rules Vela applies to it: the
system config maps the two AXI ports to memories (Sram, Dram, OnChipFlash, OffChipFlash) and the memory
mode puts the constants, the arena and the fast cache on a port; constants must end in Dram or a flash
(all three on one Sram port counts as on-chip flash), the arena in Sram or Dram, the cache in Sram.
"""

from __future__ import annotations

import configparser
import importlib.util
import logging
from functools import lru_cache
from pathlib import Path

from emlkit.errors import EXIT_USAGE, AotError

log = logging.getLogger(__name__)

VELA_INI = "Arm/vela.ini"    # EthosUCompileSpec's default, relative to Vela's config_files folder
# EthosUCompileSpec's defaults per NPU family (tests/test_npu_configs.py checks them against its flags).
DEFAULTS = {"ethos-u55": ("Ethos_U55_High_End_Embedded", "Shared_Sram"),
            "ethos-u65": ("Ethos_U65_High_End", "Dedicated_Sram_384KB"),
            "ethos-u85": ("Ethos_U85_SYS_DRAM_Mid", "Sram_Only")}
_SYS, _MODE = "System_Config.", "Memory_Mode."


def family(npu: str) -> str:
    """"ethos-u85-512" -> "ethos-u85"."""
    return npu.rsplit("-", 1)[0]


@lru_cache(maxsize=1)
def _ini() -> configparser.ConfigParser:
    spec = importlib.util.find_spec("ethosu")
    if spec is None or not spec.submodule_search_locations:
        raise AotError("Vela (the ethos-u-vela package) is not installed: run ./scripts/setup.sh", EXIT_USAGE)
    path = Path(list(spec.submodule_search_locations)[0]) / "config_files" / VELA_INI
    ini = configparser.ConfigParser()
    if not ini.read(path):
        raise AotError(f"Vela's configuration file {path} is missing: reinstall ethos-u-vela (./scripts/setup.sh)",
                       EXIT_USAGE)
    return ini


def system_configs(npu: str) -> list[str]:
    """The system configs vela.ini has for the NPU's family (named Ethos_U55_..., Ethos_U65_..., Ethos_U85_...)."""
    prefix = _SYS + "Ethos_U" + family(npu)[-2:] + "_"
    return [s[len(_SYS):] for s in _ini().sections() if s.startswith(prefix)]


def memory_modes() -> list[str]:
    return [s[len(_MODE):] for s in _ini().sections() if s.startswith(_MODE)]


def _mode_value(mode: str, key: str) -> str:
    """A memory mode's setting, following `inherit=` as Vela does."""
    ini, section, seen = _ini(), _MODE + mode, set()
    while section not in seen:
        seen.add(section)
        if ini.has_option(section, key):
            return ini.get(section, key)
        if not ini.has_option(section, "inherit"):
            break
        section = ini.get(section, "inherit")
    return "Axi0"   # Vela's default port for an unset area


def mode_problem(system_config: str, mode: str) -> str | None:
    """Why Vela refuses MODE on SYSTEM_CONFIG (None when it accepts it)."""
    ini = _ini()
    ports = {p: ini.get(_SYS + system_config, f"{p.lower()}_port", fallback="Sram") for p in ("Axi0", "Axi1")}
    const, arena, cache = (_mode_value(mode, f"{a}_mem_area") for a in ("const", "arena", "cache"))
    const_mem = ports[const]
    if const_mem == "Sram" and const == arena == cache:
        const_mem = "OnChipFlash"   # Vela reads constants from on-chip flash with the SRAM's timing
    if const_mem not in ("Dram", "OnChipFlash", "OffChipFlash"):
        return f"puts the constants in {const_mem} ({const}) (Vela needs Dram or flash)"
    if ports[arena] not in ("Sram", "Dram"):
        return f"puts the arena in {ports[arena]} ({arena}), which is read-only (Vela needs Sram or Dram)"
    if ports[cache] != "Sram":
        return f"puts the fast cache in {ports[cache]} ({cache}) (Vela needs Sram)"
    return None


def resolve(npu: str, system_config: str | None, memory_mode: str | None) -> tuple[str, str]:
    """(system config, memory mode) for the NPU, defaults filled in as ExecuTorch does; AotError (exit 2) with
    one line naming the accepted values for a choice Vela or this NPU does not accept."""
    default_sys, default_mode = DEFAULTS[family(npu)]
    sys_cfg, mode = system_config or default_sys, memory_mode or default_mode
    configs = system_configs(npu)
    if sys_cfg not in configs:
        what = "is not in Vela's vela.ini" if not _ini().has_section(_SYS + sys_cfg) else f"is not for an {family(npu)}"
        raise AotError(f"--system-config {sys_cfg} {what}: {npu} accepts {', '.join(configs)}", EXIT_USAGE)
    modes = memory_modes()
    if mode not in modes:
        raise AotError(f"--memory-mode {mode} is not in Vela's vela.ini: choose one of {', '.join(modes)}", EXIT_USAGE)
    problem = mode_problem(sys_cfg, mode)
    if problem:
        ok = [m for m in modes if mode_problem(sys_cfg, m) is None]
        raise AotError(f"--memory-mode {mode} on system config {sys_cfg} {problem}: {npu} with that system config "
                       f"accepts {', '.join(ok)}", EXIT_USAGE)
    return sys_cfg, mode
