"""ctypes view of the firmware's Ethos-U delegate parser and command-stream checker (tests/npu_check/shim.c
with firmware/npu/ethosu_blob.c and ethosu_stream.c), built with the host C compiler."""

from __future__ import annotations

import ctypes as C
import subprocess
from dataclasses import dataclass
from pathlib import Path

from emlkit.locks import held

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build" / "npu-check-host"
SOURCES = [ROOT / "tests" / "npu_check" / "shim.c", ROOT / "firmware" / "npu" / "ethosu_blob.c",
           ROOT / "firmware" / "npu" / "ethosu_stream.c", ROOT / "firmware" / "runtime" / "status.c",
           ROOT / "firmware" / "runtime" / "et_fmt.c"]
UNBOUNDED = (1 << 64) - 1
# et_status values (firmware/runtime/status.h)
STATUS = {0: "ok", 1: "invalid_program", 2: "invalid_argument", 3: "unknown_operator", 4: "not_supported",
          5: "arena_too_small", 6: "no_backend", 7: "mismatch", 8: "internal", 9: "delegate_corrupt",
          10: "npu_stream", 11: "npu_config", 12: "npu_timeout", 13: "npu_bus_error", 14: "npu_fault"}


@dataclass
class Check:
    status: str
    message: str
    used: list[int]
    written: int
    operations: int
    scratch: int


def build(sanitize: bool = False) -> Path:
    out = BUILD / ("libnpucheck-asan.so" if sanitize else "libnpucheck.so")
    with held(out):  # parallel test workers build it once
        return _build_locked(out, sanitize)


def _build_locked(out: Path, sanitize: bool) -> Path:
    if out.exists() and all(out.stat().st_mtime >= s.stat().st_mtime for s in SOURCES):
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    flags = ["-fsanitize=address,undefined", "-fno-omit-frame-pointer"] if sanitize else []
    subprocess.run(["cc", "-std=c11", "-D_ISOC11_SOURCE", "-O1", "-g", "-fPIC", "-shared", "-Wall", "-Wextra",
                    "-Wno-unused-parameter", "-Werror", *flags, "-I", str(ROOT / "firmware" / "npu"),
                    "-I", str(ROOT / "firmware" / "runtime"), *map(str, SOURCES), "-o", str(out)],
                   check=True, capture_output=True, text=True)
    return out


class NpuCheck:
    def __init__(self) -> None:
        self.lib = C.CDLL(str(build()))
        f = self.lib.npu_check
        f.argtypes = [C.c_char_p, C.c_size_t, C.c_uint64, C.POINTER(C.c_uint64), C.POINTER(C.c_uint8),
                      C.POINTER(C.c_uint32), C.POINTER(C.c_uint32), C.c_char_p, C.c_size_t]
        f.restype = C.c_int

    def __call__(self, blob: bytes, fast_limit: int = UNBOUNDED) -> Check:
        used = (C.c_uint64 * 8)()
        written, ops, scratch = C.c_uint8(), C.c_uint32(), C.c_uint32()
        msg = C.create_string_buffer(256)
        st = self.lib.npu_check(blob, len(blob), fast_limit, used, C.byref(written), C.byref(ops), C.byref(scratch),
                                msg, 256)
        return Check(STATUS.get(st, str(st)), msg.value.decode(), list(used), written.value, ops.value, scratch.value)
