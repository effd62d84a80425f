"""Shared by the NPU model tests: a compiled program's delegate blobs and TOSA graphs, random TOSA inputs,
and the bit-exactness check against tosa_reference_model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from emlkit.npu.run import run_blob

# Zoo models whose NPU compile + model run take 20-75 s each here (50-125 s on a loaded 2-core machine): the slow
# pass runs them (scripts/test.sh --slow). The main job (./test_cortex_m.sh) still runs each of them on every NPU
# target through the firmware and the co-simulated NPU, bit for bit against tosa_reference_model's outputs.
SLOW_ZOO = {"mobilenet_v2", "mobilenet_v3_small", "gru_kws", "mlperf_vww_mobilenet_v1", "mlperf_ic_resnet8",
            "transformer_block", "mlperf_ad_autoencoder", "mlperf_kws_dscnn", "digits_cnn", "unet_small",
            "conv1d_timeseries", "branch_concat"}


def compile_for_npu(model: str, target: str) -> Any:
    """A zoo program for the NPU model tests, compiled once and cached: plain lowering (they test the NPU model,
    not our graph passes), or the default one for models that reach the NPU only through our rewrites
    (global_avgpool; conv1d_timeseries' 1-D max pool on the U85)."""
    from conftest import CACHE

    from emlkit.compile import compile_model, make_options, program_cache_dir
    from emlkit.errors import AotError
    from emlkit.locks import held
    from emlkit.lower import LowerOptions

    # test_npu_model.py and test_npu_u85.py (on two pytest workers) both ask for U85 programs: one compiles, the
    # other waits and reuses it (the lock conftest.compile_cached takes)
    plain = CACHE / target / "npu-plain"
    try:
        with held(plain / Path(model).stem):
            return compile_model(model, target, plain, options=LowerOptions(), reuse_cache=True)
    except AotError:
        default = program_cache_dir(CACHE, target)
        with held(default / Path(model).stem):
            return compile_model(model, target, default, options=make_options(True, False, False), reuse_cache=True)


def program_parts(res: Any) -> tuple[list[bytes], list[bytes]]:
    """A CompileResult -> (delegate blobs, the TOSA graph Vela compiled for each)."""
    from executorch.exir._serialize._program import deserialize_pte_binary

    prog = deserialize_pte_binary(res.pte.read_bytes()).program
    blobs = [bytes(d.data) for d in prog.backend_delegate_data]
    tdir = res.pte.parent / f"{res.pte.stem}.tosa"
    tosas = [(tdir / f"lowered_module_{i}.tosa").read_bytes() for i in range(len(blobs))]
    return blobs, tosas


def tosa_inputs(tosa: bytes, rng: np.random.Generator) -> list[np.ndarray]:
    """Random full-range inputs for a TOSA graph."""
    import tosa.TosaGraph as TG  # type: ignore[import-not-found]

    blk = TG.TosaGraph.GetRootAs(tosa, 0).Regions(0).Blocks(0)
    tensors = {blk.Tensors(i).Name(): blk.Tensors(i) for i in range(blk.TensorsLength())}
    kinds = {3: np.int8, 4: np.int16}
    out = []
    for i in range(blk.InputsLength()):
        t = tensors[blk.Inputs(i)]
        dt = kinds[t.Type()]
        info = np.iinfo(dt)
        out.append(rng.integers(info.min, info.max + 1, tuple(t.ShapeAsNumpy())).astype(dt))
    return out


def bit_exact_vs_tosa(blobs: list[bytes], tosas: list[bytes], model: str, trials: int = 2) -> None:
    import tosa_reference_model as ref  # type: ignore[import-not-found]

    rng = np.random.default_rng(1)
    for blob, tosa in zip(blobs, tosas):
        for _ in range(trials):  # random full-range inputs per delegate
            ins = tosa_inputs(tosa, rng)
            want, status = ref.run(tosa, ins, verbosity="NONE", initialize_variable_tensor_from_numpy=True)
            assert status == ref.GraphStatus.TOSA_VALID
            got, _ = run_blob(blob, ins)
            assert len(got) == len(want)
            for g, w in zip(got, want):
                w = np.asarray(w)
                assert np.array_equal(g.reshape(w.shape).astype(np.int64), w.astype(np.int64)), model


def feature_map(prefix: str, h: int, w: int, c: int, base: int, prec: int, zp: int = 0, esize: int = 1,
                region: int = 1) -> list[tuple]:
    """The register commands that describe one feature map (one tile, NHWC), for hand-built streams."""
    p = f"NPU_SET_{prefix}_"
    out = [(p + "REGION", region), (p + "BASE0", 0, base), (p + "BASE1", 0, 0), (p + "BASE2", 0, 0), (p + "BASE3", 0, 0),
           (p + "HEIGHT0_M1", h - 1), (p + "HEIGHT1_M1", h - 1), (p + "WIDTH0_M1", w - 1),
           (p + "STRIDE_Y", 0, w * c * esize), (p + "STRIDE_X", 0, c * esize), (p + "STRIDE_C", 0, esize),
           (p + "ZERO_POINT", zp & 0xFFFF), (p + "PRECISION", prec)]
    if prefix == "OFM":
        out += [("NPU_SET_OFM_HEIGHT_M1", h - 1), ("NPU_SET_OFM_WIDTH_M1", w - 1), ("NPU_SET_OFM_DEPTH_M1", c - 1)]
    if prefix == "IFM":
        out += [("NPU_SET_IFM_DEPTH_M1", c - 1)]
    return out
