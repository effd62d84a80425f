"""On the int8 Ethos-U targets the ops ExecuTorch's partitioner leaves on the CPU run as the Cortex-M flow's
int8 kernels where one takes them (passes declared for manager.CPU_SIDE): tests/models/resize_argmax_head.py, a
bilinear resize with align_corners=True and an argmax, was refused without --allow-float ("float left on the CPU").
The NPU keeps what it takes: the U85 runs that resize as a TOSA RESIZE, the U55 none; the argmax's int64 indices
are on the CPU of both. tests/models/codes_ops_head.py: a median and a masked_fill with a scalar, left on the CPU
of both, run on int8 codes (the U85's masked_fill in the form of ExecuTorch's decomposition: full_like, where), as
does tests/models/adaptive_max_head.py's adaptive max pool. tests/models/embedding_bag_head.py's embedding bags
run as int8 table sums."""

from __future__ import annotations

from pathlib import Path

import pytest
from toolchain import HAVE_ARM_GCC, HAVE_QEMU

MODEL = Path(__file__).parent / "models" / "resize_argmax_head.py"
SNR_FLOOR_DB = 35.0   # measured 38.3 dB on both targets (the resize's int8 kernel is within 1 step of torch's)
CODES_MODEL = Path(__file__).parent / "models" / "codes_ops_head.py"
CODES_SNR_FLOOR_DB = 25.0  # measured 32.5 dB on both targets
POOL_MODEL = Path(__file__).parent / "models" / "adaptive_max_head.py"
POOL_SNR_FLOOR_DB = 35.0  # measured 42.1 dB on both targets
BAG_MODEL = Path(__file__).parent / "models" / "embedding_bag_head.py"
BAG_SNR_FLOOR_DB = 40.0  # measured 46.3 dB on both targets


def _compile(tmp_path: Path, model: Path, target: str) -> object:
    from emlkit.compile import compile_model, make_options

    return compile_model(str(model), target, tmp_path, options=make_options())  # no --allow-float


def _bit_exact(res: object, board: str, sim: str) -> None:
    from emlkit.run import execute

    o = execute(res, board, sim, 300, "mve", None)
    assert o.status == "PASS", (board, o.reason)
    assert o.result.outputs and all(d.max_steps == 0 for d in o.result.outputs), board


@pytest.mark.parametrize("target, resize_on_npu", [("ethos-u55-128", False), ("ethos-u85-256", True)])
def test_ops_left_on_the_cpu_run_int8(tmp_path: Path, target: str, resize_on_npu: bool) -> None:
    res = _compile(tmp_path, MODEL, target)
    ops, npu = res.report["ops"], res.report["delegated_ops"]
    assert ops.get("aten::argmax") == 1 and ops.get("delegate:EthosUBackend"), ops
    if resize_on_npu:
        assert npu.get("aten::upsample_bilinear2d") == 1 and "emlkit::upsample_bilinear2d" not in ops, (ops, npu)
    else:
        assert ops.get("emlkit::upsample_bilinear2d") == 1 and "aten::upsample_bilinear2d" not in npu, (ops, npu)
    assert not res.report["verify"]["float_islands"], res.report["verify"]
    assert res.report["numerics"]["snr_db"] > SNR_FLOOR_DB, res.report["numerics"]
    _bit_exact(res, "host", "auto")
    if target == "ethos-u55-128" and HAVE_ARM_GCC and HAVE_QEMU:  # the same program through the firmware
        _bit_exact(res, "corstone-300", "qemu")


@pytest.mark.parametrize("target", ["ethos-u55-128", "ethos-u85-256"])
def test_codes_ops_left_on_the_cpu_run_int8(tmp_path: Path, target: str) -> None:
    """The U85's masked_fill reaches the CPU as ExecuTorch's decomposition (a quantized full_like, where): it runs
    on codes as the U55's masked_fill does, and so does the median on both."""
    from emlkit.run import execute

    res = _compile(tmp_path, CODES_MODEL, target)
    ops = res.report["ops"]
    assert ops.get("aten::median") == 1 and ops.get("aten::where") == 1 and ops.get("delegate:EthosUBackend"), ops
    assert "aten::full_like" not in ops and not res.report["verify"]["float_islands"], res.report["verify"]
    assert res.report["numerics"]["snr_db"] > CODES_SNR_FLOOR_DB, res.report["numerics"]
    o = execute(res, "host", "auto", 300, "mve", None)
    assert o.status == "PASS", o.reason
    assert all(d.max_steps == 0 for d in o.result.outputs), [d.max_steps for d in o.result.outputs]


@pytest.mark.parametrize("target", ["ethos-u55-128", "ethos-u85-256"])
def test_adaptive_max_left_on_the_cpu_runs_on_codes(tmp_path: Path, target: str) -> None:
    """An adaptive max pool to a size that does not divide its input stays on the CPU of both NPUs: it runs on the
    conv's int8 codes (torch's own kernel refuses int8, so the compile's checks run it as the host reference does)."""
    res = _compile(tmp_path, POOL_MODEL, target)
    ops = res.report["ops"]
    assert ops.get("aten::adaptive_max_pool2d") == 1 and ops.get("delegate:EthosUBackend"), ops
    assert not res.report["verify"]["float_islands"], res.report["verify"]
    assert res.report["numerics"]["snr_db"] > POOL_SNR_FLOOR_DB, res.report["numerics"]
    _bit_exact(res, "host", "auto")
    if target == "ethos-u55-128" and HAVE_ARM_GCC and HAVE_QEMU:  # the firmware's int8 adaptive max pool
        _bit_exact(res, "corstone-300", "qemu")


@pytest.mark.parametrize("target", ["ethos-u55-128", "ethos-u85-256"])
def test_embedding_bags_left_on_the_cpu_run_int8(tmp_path: Path, target: str) -> None:
    """Embedding bags (mean; weighted sum) into a cat stay on the CPU of both NPUs and run as emlkit::embedding_bag:
    the int8 quantizer gives their values an output of their own (npu_bag_outputs.py), and the int32 copies the Arm
    flow makes of int64 indices and offsets are looked through. The NPU's Linear reads their codes."""
    res = _compile(tmp_path, BAG_MODEL, target)
    ops = res.report["ops"]
    assert ops.get("emlkit::embedding_bag") == 2 and ops.get("delegate:EthosUBackend"), ops
    assert not any("embedding_bag" in k for k in ops if k.startswith("aten::")), ops
    assert not res.report["verify"]["float_islands"], res.report["verify"]
    assert res.report["numerics"]["snr_db"] > BAG_SNR_FLOOR_DB, res.report["numerics"]
    _bit_exact(res, "host", "auto")
    if target == "ethos-u55-128" and HAVE_ARM_GCC and HAVE_QEMU:  # the firmware's emlkit::embedding_bag
        _bit_exact(res, "corstone-300", "qemu")
