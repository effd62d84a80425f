"""Shared fixtures: compiled zoo programs cached across test files and runs; the CLI run in this process."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from emlkit.locks import held

ROOT = Path(__file__).resolve().parent.parent

# Compiled programs are cached here by compile_model's cache key (model source,
# target, options, toolkit sources), so a rerun only recompiles what changed.
CACHE = Path(os.environ.get("AOT_TEST_CACHE", ROOT / "build" / "test-programs"))


def compile_cached(model: str, target: str, lut_fusion: bool = True, explicit_layout: bool = False,
                   allow_float: bool = False):
    """Compile (or reuse) MODEL for TARGET; returns emlkit.compile.CompileResult."""
    from emlkit.compile import compile_model, make_options, program_cache_dir

    opts = make_options(lut_fusion, explicit_layout, allow_float)
    out = program_cache_dir(CACHE, target, lut_fusion, explicit_layout, allow_float)
    with held(out / Path(model).stem):  # parallel workers: one compiles, the other then reuses it
        return compile_model(model, target, out, options=opts, reuse_cache=True)


# Files in the order the pytest workers should take them (./scripts/test.sh: --dist loadfile, no reorder): the
# longest first, so that the two workers finish together instead of one running a long file alone at the end.
# Ranked by a timed run of the quick pass; files not named follow in collection order. An order, not a result:
# a stale entry costs minutes, never a wrong verdict.
LONGEST_FIRST = [
    "test_npu_model.py", "test_cores.py", "test_ethos_u_wrong_lowerings.py", "passes/test_emlkit_lstm.py",
    "test_zoo_targets.py", "test_compile_zoo.py", "test_npu_u85.py", "passes/test_patch_stages.py",
    "test_memory_plan.py", "test_kernels.py", "test_fuzz_models.py", "passes/test_lut_fusion.py",
    "test_npu_firmware.py", "test_float_kernels.py", "test_int8_gaps_on_qemu.py", "test_npu_configs.py",
    "test_robustness.py", "test_user_models.py", "test_run.py", "test_opsuite.py", "test_lstm_streaming.py",
    "test_device_load_check.py", "test_lstm_on_qemu.py", "test_int8_ops_on_qemu.py", "test_op_order.py",
    "test_bad_input.py", "test_runtime.py", "test_boards.py",
]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}

    def key(item: pytest.Item) -> int:
        rel = Path(str(item.fspath)).resolve().relative_to(ROOT / "tests").as_posix()
        return rank.get(rel, len(rank))

    items.sort(key=key)  # stable: within a file, and among unnamed files, the collection order stays


@pytest.fixture(scope="session")
def compiled():
    return compile_cached


@pytest.fixture
def emlkit_cli(capfd):
    """`emlkit ARGS` in this process (tests/cli_in_process.py): emlkit_cli([...], cwd) -> returncode, stdout, stderr."""
    from cli_in_process import cli_runner

    return cli_runner(capfd)
