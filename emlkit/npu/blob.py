"""Parse the binary that ExecuTorch's Ethos-U backend stores as a delegate's processed bytes.

Layout (written by executorch/backends/arm/arm_vela.py, read on the device by
VelaBinStream.cpp): a sequence of blocks, each a 16-byte NUL-padded name, a
little-endian u32 payload length, a u8 "external" flag, 11 reserved bytes,
then the payload padded to 16 bytes. Blocks: vela_bin_stream (start marker),
cmd_data (driver header + register command stream), weight_data, scratch_size,
inputs, outputs, vela_end_stream (end marker). Each IO entry is a 6-D shape,
element size, byte offset and region (all i32).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

import numpy as np

from emlkit.npu.errors import NpuError

_HEADER = struct.Struct("<16sIB11s")
_START, _END = "vela_bin_stream", "vela_end_stream"
_REQUIRED = ("cmd_data", "weight_data", "scratch_size", "inputs", "outputs")

# Driver-action tags that may precede the command stream in cmd_data (Vela's driver_actions.py).
_DA_CONFIG, _DA_CMDSTREAM, _DA_READAPB, _DA_DUMPSHRAM, _DA_NOP = 0x01, 0x02, 0x03, 0x04, 0x05
PRODUCTS = {0: "Ethos-U55", 1: "Ethos-U65", 2: "Ethos-U85"}


@dataclass(frozen=True)
class IoTensor:
    shape: tuple[int, ...]   # 6-D as Vela wrote it (leading 1s)
    elem_size: int
    offset: int              # byte offset inside its region
    region: int

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape)) * self.elem_size


@dataclass(frozen=True)
class DriverConfig:
    product: int
    macs_per_cc: int         # log2
    shram_kib: int
    arch_id: int

    @property
    def product_name(self) -> str:
        return PRODUCTS.get(self.product, f"unknown product {self.product}")


@dataclass
class VelaBlob:
    commands: np.ndarray          # uint32 register command stream (without driver header)
    cmd_offset: int               # byte offset of `commands` inside cmd_data (for error messages)
    weights: bytes                # region 0 at run time
    scratch_size: int             # region 1 (and 2) at run time
    inputs: list[IoTensor]
    outputs: list[IoTensor]
    config: DriverConfig | None
    blocks: dict[str, bytes] = field(default_factory=dict)


def _blocks(data: bytes) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    pos = 0
    names: list[str] = []
    while pos < len(data):
        if pos + _HEADER.size > len(data):
            raise NpuError(f"Vela blob truncated: block header at byte {pos} needs {_HEADER.size} bytes, "
                           f"{len(data) - pos} left; recompile the model or pass the delegate's full processed bytes")
        raw_name, length, external, _ = _HEADER.unpack_from(data, pos)
        name = raw_name.split(b"\0", 1)[0].decode("ascii", "replace")
        pos += _HEADER.size
        if not names and name != _START:
            raise NpuError(f"not a Vela blob: first block is '{name}', expected '{_START}' "
                           "(give the EthosUBackend delegate's processed bytes)")
        if pos + length > len(data):
            raise NpuError(f"Vela blob truncated: block '{name}' declares {length} bytes at offset {pos}, "
                           f"only {len(data) - pos} present; the blob is corrupt or cut short")
        if external:
            raise NpuError(f"Vela blob block '{name}' is stored as an external named-data reference; "
                           "compile without external block placements so the data is inline")
        out[name] = bytes(data[pos:pos + length])
        names.append(name)
        pos += (length + 15) // 16 * 16
        if name == _END:
            break
    if not names:
        raise NpuError("empty Vela blob: the delegate has no processed bytes")
    if names[-1] != _END:
        raise NpuError(f"Vela blob truncated: no '{_END}' marker after block '{names[-1]}'")
    missing = [b for b in _REQUIRED if b not in out]
    if missing:
        raise NpuError(f"Vela blob lacks block(s) {', '.join(missing)}; it was not written by arm_vela.py")
    return out


def _io(raw: bytes, what: str) -> list[IoTensor]:
    if len(raw) < 4:
        raise NpuError(f"Vela blob '{what}' block is {len(raw)} bytes, too short for its count")
    (n,) = struct.unpack_from("<i", raw)
    if n < 0 or 4 + n * 36 != len(raw):
        raise NpuError(f"Vela blob '{what}' block: {n} entries do not fit its {len(raw)} bytes")
    res = []
    for i in range(n):
        v = struct.unpack_from("<9i", raw, 4 + 36 * i)
        if any(d < 0 for d in v[:6]) or v[6] not in (1, 2, 4) or v[7] < 0:
            raise NpuError(f"Vela blob '{what}' entry {i} is malformed: shape {v[:6]}, element size {v[6]}, offset {v[7]}")
        res.append(IoTensor(tuple(v[:6]), v[6], v[7], v[8]))
    return res


def _driver_header(cmd: bytes) -> tuple[int, DriverConfig | None]:
    """Skip the COP1 driver actions; returns the byte offset of the command stream and the config."""
    if len(cmd) % 4:
        raise NpuError(f"cmd_data is {len(cmd)} bytes, not a whole number of 32-bit words")
    words = np.frombuffer(cmd, dtype="<u4")
    if len(words) == 0 or cmd[:4] != b"COP1":
        # Raw command stream without a driver header.
        return 0, None
    i, config = 1, None
    while i < len(words):
        tag = int(words[i])
        kind, param = tag & 0xFF, tag >> 16
        if kind == _DA_CONFIG:
            if i + 2 >= len(words):
                raise NpuError("cmd_data truncated inside the COP1 driver config")
            cw = int(words[i + 1])
            config = DriverConfig(product=cw >> 28, macs_per_cc=cw & 0xF, shram_kib=(cw >> 8) & 0xFF, arch_id=int(words[i + 2]))
            i += 3
        elif kind == _DA_NOP:
            i += 1
        elif kind == _DA_READAPB or kind == _DA_DUMPSHRAM:
            i += 1
        elif kind == _DA_CMDSTREAM:
            length = param | (((tag >> 8) & 0xFF) << 16)
            start = i + 1
            if start + length > len(words):
                raise NpuError(f"cmd_data truncated: driver header announces {length} command words, "
                               f"{len(words) - start} present")
            return start * 4, config
        else:
            raise NpuError(f"unknown COP1 driver action 0x{kind:02x} at byte {4 * i} of cmd_data")
    raise NpuError("cmd_data has a COP1 header but no command stream entry")


def parse_blob(data: bytes) -> VelaBlob:
    """Vela blob bytes (lowered_module.processed_bytes) -> its parts; NpuError on anything malformed."""
    blocks = _blocks(bytes(data))
    cmd = blocks["cmd_data"]
    start, config = _driver_header(cmd)
    if start and cmd[:4] == b"COP1":
        length = (len(cmd) - start) // 4
        tag = int(np.frombuffer(cmd, dtype="<u4")[start // 4 - 1])
        length = (tag >> 16) | (((tag >> 8) & 0xFF) << 16)
    else:
        length = len(cmd) // 4
    commands = np.frombuffer(cmd, dtype="<u4", count=length, offset=start).copy()
    if len(blocks["scratch_size"]) != 4:
        raise NpuError(f"Vela blob 'scratch_size' block is {len(blocks['scratch_size'])} bytes, expected 4")
    (scratch,) = struct.unpack("<I", blocks["scratch_size"])
    return VelaBlob(commands=commands, cmd_offset=start, weights=blocks["weight_data"], scratch_size=scratch,
                    inputs=_io(blocks["inputs"], "inputs"), outputs=_io(blocks["outputs"], "outputs"),
                    config=config, blocks=blocks)
