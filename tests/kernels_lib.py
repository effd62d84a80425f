"""ctypes bindings for the host build of firmware/kernels (fw_kernels_shared).

Used by tests/test_kernels.py. The library is built once per session into
build/kernels-host with CMake (the target lives in firmware/CMakeLists.txt);
if the host board files are missing, the kernel sources are compiled directly
with the system C compiler so the kernels can still be tested in isolation.
"""

from __future__ import annotations

import ctypes as C
from typing import Any
import logging
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np

from emlkit.locks import held

ROOT = Path(__file__).resolve().parent.parent
KERNELS = ROOT / "firmware" / "kernels"
BUILD = ROOT / "build" / "kernels-host"
log = logging.getLogger(__name__)

i32 = C.c_int32
P = C.c_void_p


def _cmake_build() -> Path | None:
    if not (ROOT / "boards" / "host" / "board.cmake").exists():
        return None
    cmake = shutil.which("cmake") or str(ROOT / ".venv" / "bin" / "cmake")
    subprocess.run([cmake, "-S", str(ROOT / "firmware"), "-B", str(BUILD), "-DBOARD=host",
                    "-DCMAKE_BUILD_TYPE=Release"], check=True, capture_output=True, text=True)
    subprocess.run([cmake, "--build", str(BUILD), "--target", "fw_kernels_shared", "-j2"],
                   check=True, capture_output=True, text=True)
    libs = sorted(BUILD.rglob("libfw_kernels.so"))
    return libs[0] if libs else None


def _direct_build() -> Path:
    out = BUILD / "direct" / "libfw_kernels.so"
    out.parent.mkdir(parents=True, exist_ok=True)
    srcs = sorted(str(p) for p in KERNELS.glob("*.c"))
    subprocess.run(["cc", "-std=gnu11", "-O2", "-fPIC", "-shared", "-Wall", "-Wextra",
                    "-Wno-unused-parameter", "-Werror", "-I", str(KERNELS), *srcs, "-o", str(out), "-lm"],
                   check=True, capture_output=True, text=True)
    return out


def build_library() -> Path:
    """Build the host kernels library and return its path.

    FW_KERNELS_LIB names an already built one instead (scripts/mutation_check.py rebuilds only the
    mutated source per mutant)."""
    given = os.environ.get("FW_KERNELS_LIB")
    if given:
        return Path(given)
    with held(BUILD):  # parallel test workers build it once
        try:
            lib = _cmake_build()
        except subprocess.CalledProcessError as e:
            log.warning("CMake build of fw_kernels_shared failed (%s); compiling kernels directly", e.stderr[-500:])
            lib = None
        if lib is None:
            log.warning("boards/host/board.cmake missing or no library built; compiling kernels directly")
            lib = _direct_build()
        return lib


class QAdd(C.Structure):
    _fields_ = [(n, i32) for n in ("a_zp", "a_mult", "a_shift", "b_zp", "b_mult", "b_shift",
                                    "out_zp", "out_mult", "out_shift", "act_min", "act_max")]


class QMul(C.Structure):
    _fields_ = [(n, i32) for n in ("a_zp", "b_zp", "out_zp", "out_mult", "out_shift")]


class QConv(C.Structure):
    _fields_ = [(n, i32) for n in ("batch", "in_h", "in_w", "in_c", "out_h", "out_w", "out_c",
                                    "k_h", "k_w", "stride_h", "stride_w", "pad_h", "pad_w",
                                    "dil_h", "dil_w", "groups", "input_offset", "output_offset",
                                    "act_min", "act_max")] + [("beff", C.c_void_p), ("dwblk", C.c_void_p)]


class QLinear(C.Structure):
    _fields_ = [(n, i32) for n in ("rows", "k", "n", "input_offset", "filter_offset",
                                    "output_offset", "mult", "shift", "act_min", "act_max")]


class QBmm(C.Structure):
    _fields_ = [(n, i32) for n in ("batch", "m", "n", "k", "lhs_offset", "rhs_offset", "out_zp",
                                    "mult", "shift")]


class QPool(C.Structure):
    _fields_ = [(n, i32) for n in ("batch", "in_h", "in_w", "c", "out_h", "out_w", "k_h", "k_w",
                                    "stride_h", "stride_w", "pad_h", "pad_w")]


class QFloorDiv(C.Structure):
    _fields_ = [(n, i32) for n in ("a_zp", "b_zp", "a_mant", "b_mant", "exp", "out_zp", "mult", "shift")]


class QBcastWalk(C.Structure):
    _fields_ = [("rank", i32), ("size", i32 * 6), ("a_step", i32 * 6), ("b_step", i32 * 6)]


class QRowWalk(C.Structure):
    _fields_ = [("rank", i32), ("size", i32 * 6), ("x_step", i32 * 6), ("m_step", i32 * 6)]


class QEmbeddingBag(C.Structure):
    _fields_ = [(n, i32) for n in ("num", "dim", "n_idx", "n_off", "include_last_offset", "mode", "padding_idx",
                                    "w_zp", "out_zp", "mult", "shift", "psw_zp")]


class QLstm(C.Structure):
    _fields_ = [(n, i32) for n in ("batch", "steps", "in_", "hid", "batch_first", "x_zp", "h_zp", "cell_frac",
                                    "out_mult", "out_shift")]


class QGru(C.Structure):
    _fields_ = [(n, i32) for n in ("batch", "steps", "in_", "hid", "batch_first", "x_zp", "h_zp", "h_mult", "h_shift",
                                    "out_mult", "out_shift")]


def ptr(a: np.ndarray | None) -> int | None:
    if a is None:
        return None
    assert a.flags["C_CONTIGUOUS"]
    return a.ctypes.data


class Kernels:
    """Thin typed wrappers; every array argument must be C-contiguous numpy."""

    def __init__(self, path: Path) -> None:
        self.lib = C.CDLL(str(path))
        sz = C.c_size_t
        sig = {
            "emk_quantize_f32": [P, sz, C.c_double, i32, i32, i32, C.c_int, P],
            "emk_dequantize_f32": [P, C.c_int, sz, C.c_double, i32, P],
            "emk_add_s8": [P, sz, P, sz, P, C.POINTER(QAdd)],
            "emk_mul_s8": [P, sz, P, sz, P, C.POINTER(QMul)],
            "emk_div_s8": [P, P, P, sz, i32, i32, i32, C.c_double],
            "emk_div_s16": [P, P, P, sz, i32, i32, i32, C.c_double],
            "emk_lut_s8": [P, P, sz, P],
            "emk_conv2d_s8": [C.POINTER(QConv), P, P, P, P, P, P],
            "emk_depthwise_conv2d_s8": [C.POINTER(QConv), P, P, P, P, P, P],
            "emk_transpose_conv2d_s8": [C.POINTER(QConv), P, P, P, P, P, P],
            "emk_linear_s8": [C.POINTER(QLinear), P, P, P, P, P],
            "emk_batch_matmul_s8": [C.POINTER(QBmm), P, P, P],
            "emk_avg_pool2d_s8": [C.POINTER(QPool), P, P, i32, i32, i32],
            "emk_max_pool2d_s8": [C.POINTER(QPool), P, P, i32, i32],
            "emk_softmax_s8": [P, P, i32, i32, i32, i32, i32, i32, i32],
            "emk_emlkit_softmax_s8": [P, P, i32, i32, i32, P, i32, i32, i32],
            "emk_emlkit_log_softmax_s8": [P, P, i32, i32, i32, P, i32, i32, i32, i32],
            "emk_emlkit_masked_softmax_s8": [P, P, P, C.POINTER(QRowWalk), P, i32, i32, i32],
            "emk_emlkit_avg_pool2d_s8": [C.POINTER(QPool), P, P, i32, i32, i32, i32],
            "emk_emlkit_resize_bilinear_s8": [P, P, i32, i32, i32, i32, i32, i32, P, P, i32, i32, i32, i32],
            "emk_emlkit_prelu_s8": [P, P, i32, i32, i32, P, i32, i32, i32, i32],
            "emk_emlkit_adaptive_avg_pool2d_s8": [P, P, i32, i32, i32, i32, i32, i32, P, P, P, i32, i32],
            "emk_emlkit_floor_divide_s8": [P, P, P, sz, C.POINTER(QFloorDiv)],
            "emk_emlkit_floor_divide_bcast_s8": [P, P, P, C.POINTER(QBcastWalk), C.POINTER(QFloorDiv)],
            "emk_emlkit_embedding_bag_s8": [C.POINTER(QEmbeddingBag), P, P, P, P, P],
            "emk_emlkit_lstm_s8": [C.POINTER(QLstm), P, P, P, P, P, P, P, P, P],
            "emk_emlkit_gru_s8": [C.POINTER(QGru), P, P, P, P, P, P, P, P],
            "emk_minmax_any": [C.c_int, C.c_int, C.c_int, P, P, P, P, P, P],
            "emk_pad_any": [sz, P, P, P, P, P, P],
            "emk_transpose_any": [sz, C.c_int, P, P, P, P],
        }
        for base, args in sig.items():
            for name in (base, base + "_ref"):
                f = getattr(self.lib, name)
                f.argtypes = args
                f.restype = None
        q = self.lib.emk_emlkit_exp_quotient
        q.argtypes, q.restype = [C.c_uint64, C.c_uint64], C.c_uint64
        # kernels given scratch memory: the dispatcher takes it and returns a k_status
        for base, params in (("emk_conv2d_s8", QConv), ("emk_depthwise_conv2d_s8", QConv), ("emk_avg_pool2d_s8", QPool)):
            f = getattr(self.lib, base)
            f.argtypes = [*sig[base], P, sz]
            f.restype = C.c_int
            g = getattr(self.lib, base + "_get_buffer_size")
            g.argtypes = [C.POINTER(params)]
            g.restype = sz

    def conv(self, name: str, ref: bool, p: Any, *ptrs: Any) -> None:
        """Call a kernel that takes scratch (conv family, average pool); the dispatcher gets exactly its scratch size
        (followed by guard bytes that must stay untouched)."""
        if ref:
            self.fn(name, True)(C.byref(p), *ptrs)
            return
        need = getattr(self.lib, name + "_get_buffer_size")(C.byref(p))
        buf = np.full(need + 64, 0xA5, np.uint8)
        status = getattr(self.lib, name)(C.byref(p), *ptrs, buf.ctypes.data, need)
        assert status == 0, f"{name} returned status {status} with {need} bytes of scratch"
        assert (buf[need:] == 0xA5).all(), f"{name} wrote past its {need} bytes of scratch"

    def fn(self, name: str, ref: bool):
        return getattr(self.lib, name + ("_ref" if ref else ""))
