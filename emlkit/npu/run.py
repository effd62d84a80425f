"""Running a Vela blob on the functional model: the machine for the blob's NPU, inputs in, outputs out.

Apart from execute.py (the U55/U65 machine) because it picks between that and execute_u85.py's
U85 machine, which derives from it.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from emlkit.npu.blob import VelaBlob, parse_blob
from emlkit.npu.commands import decode
from emlkit.npu.errors import NpuError
from emlkit.npu.execute import Machine, TraceEntry
from emlkit.npu.execute_u85 import MachineU85


def machine_for(blob: VelaBlob) -> Machine:
    """The machine model for the NPU the blob was compiled for (from its COP1 driver header; U55 without one)."""
    product = blob.config.product if blob.config is not None else 0
    if product in (0, 1):
        # The 32-MAC U55 computes 4 OFM channels per micro-block (Vela's ArchitectureConfig: OFM ublock 1x1x4,
        # IFM ublock 1x1x8); every other U55/U65 configuration 8. The weight stream is ordered by them.
        # The Ethos-U65-512 is two 256-MAC cores (Vela's ArchitectureConfig: 256 MACs, 2 cores), each with its own
        # weight and scale streams for every other OFM channel.
        macs = 1 << blob.config.macs_per_cc if blob.config is not None else 128
        cores = 2 if (product == 1 and macs == 512) else 1
        return Machine(blob, ifm_ublock=8, ofm_ublock=4 if macs == 32 else 8, cores=cores)
    if product == 2:
        return MachineU85(blob)
    raise NpuError(f"command stream targets {blob.config.product_name if blob.config else product}: "
                   "the functional model runs Ethos-U55, U65 and U85 streams")


def _io_dtype(t: Any) -> Any:
    return {1: np.int8, 2: np.int16, 4: np.int32}[t.elem_size]


def execute_delegate(blob: bytes, inputs: list[np.ndarray], trace: bool = False) -> list[np.ndarray]:
    """Run one Ethos-U delegate (lowered_module.processed_bytes) on the functional model.

    inputs: one array per delegate input, in the blob's input order; any shape whose element count and
    item size match the blob's IO entry (the bytes are copied as they lie, NHWC as Vela expects).
    Returns the outputs as flat int arrays reshaped to the blob's (squeezed 6-D) output shapes.
    With trace=True the per-command trace is logged at INFO level (see run_blob for the entries).
    """
    outs, _ = run_blob(blob, inputs, keep=trace)
    return outs


def run_blob(blob: bytes | VelaBlob, inputs: list[np.ndarray], keep: bool = False,
             on_op: Callable[[TraceEntry], None] | None = None) -> tuple[list[np.ndarray], list[TraceEntry]]:
    """Like execute_delegate, also returning the per-command trace (with OFM arrays when keep=True)."""
    vb = blob if isinstance(blob, VelaBlob) else parse_blob(blob)
    if len(inputs) != len(vb.inputs):
        raise NpuError(f"the delegate takes {len(vb.inputs)} inputs, {len(inputs)} were given")
    m = machine_for(vb)
    m.keep_outputs = keep
    for i, (arr, io) in enumerate(zip(inputs, vb.inputs)):
        a = np.ascontiguousarray(np.asarray(arr))
        if a.dtype.itemsize != io.elem_size or a.size * io.elem_size != io.nbytes:
            raise NpuError(f"delegate input {i}: got {a.size} x {a.dtype.itemsize}-byte elements, the blob expects "
                           f"shape {io.shape[-4:]} of {io.elem_size}-byte elements")
        mem = m.mem(io.region, f"input {i}")
        if io.offset + io.nbytes > len(mem):
            raise NpuError(f"delegate input {i} at offset {io.offset} does not fit region {io.region}")
        mem[io.offset:io.offset + io.nbytes] = a.view(np.uint8).ravel()
    cmds = decode(vb.commands, 0, m.arch)
    m.run(cmds, on_op)
    outs = []
    for i, io in enumerate(vb.outputs):
        mem = m.mem(io.region, f"output {i}")
        raw = mem[io.offset:io.offset + io.nbytes].copy()
        dt = np.dtype(_io_dtype(io)).newbyteorder("<")
        shape = tuple(io.shape)
        while len(shape) > 1 and shape[0] == 1:
            shape = shape[1:]
        outs.append(raw.view(dt).astype(dt.newbyteorder("=")).reshape(shape))
    return outs, m.trace
