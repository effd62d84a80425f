"""A bundled program's test case as raw bytes in the program's own memory layout.

The .bpte holds each input and expected output with its own dim order; a device
takes and gives tensor bytes in the dim order the *program* planned for that
value (channels last for the Cortex-M flow's 4-D activations). These helpers
read both and re-lay the test tensors, so C code can memcpy them
(`emlkit export` embeds them; tests/test_api.py feeds them to the C API).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from emlkit.errors import AotError
from emlkit.npu.program import from_memory, to_memory

# ExecuTorch ScalarType -> (C type, torch dtype)
SCALAR_TYPES: dict[int, tuple[str, torch.dtype]] = {
    0: ("uint8_t", torch.uint8), 1: ("int8_t", torch.int8), 2: ("int16_t", torch.int16), 3: ("int32_t", torch.int32),
    4: ("int64_t", torch.int64), 6: ("float", torch.float32), 7: ("double", torch.float64), 11: ("bool", torch.bool),
}


@dataclass
class TensorBytes:
    scalar_type: int         # ExecuTorch ScalarType
    sizes: list[int]         # logical shape
    dim_order: list[int]     # memory order of the bytes
    data: bytes              # laid out in dim_order

    @property
    def c_type(self) -> str:
        return SCALAR_TYPES[self.scalar_type][0]

    @property
    def dtype(self) -> torch.dtype:
        return SCALAR_TYPES[self.scalar_type][1]


@dataclass
class BundledCase:
    program: bytes
    inputs: list[TensorBytes]
    expected: list[TensorBytes]
    method: str


def _order(t: Any) -> list[int]:
    order = [int(d) for d in (t.dim_order or [])]
    return order if len(order) == len(t.sizes) else list(range(len(t.sizes)))


def _relayout(bundled: Any, planned: Any, what: str) -> TensorBytes:
    """A bundled tensor, re-laid in the dim order the program planned for its value."""
    st = int(bundled.scalar_type)
    if st not in SCALAR_TYPES:
        raise AotError(f"{what}: scalar type {st} is not supported by the exported firmware")
    if int(planned.scalar_type) != st or [int(s) for s in planned.sizes] != [int(s) for s in bundled.sizes]:
        raise AotError(f"{what}: the test tensor's dtype or shape differs from the program's")
    dt = SCALAR_TYPES[st][1]
    raw = torch.frombuffer(bytearray(bytes(bundled.data)), dtype=dt) if len(bundled.data) else torch.zeros(0, dtype=dt)
    logical = from_memory(raw, [int(s) for s in bundled.sizes], _order(bundled))
    order = _order(planned)
    return TensorBytes(st, [int(s) for s in planned.sizes], order, to_memory(logical, order).tobytes())


def bundled_case(bpte: bytes, case: int = 0) -> BundledCase:
    """Program bytes plus test case `case` of a .bpte, every tensor in the program's layout."""
    from executorch.devtools.bundled_program.serialize import deserialize_from_flatbuffer_to_bundled_program
    from executorch.exir._serialize._program import deserialize_pte_binary
    from executorch.exir.schema import Tensor

    if len(bpte) < 8 or bpte[4:8] != b"BP08":
        raise AotError("not a bundled program (.bpte): identifier BP08 missing")
    bp = deserialize_from_flatbuffer_to_bundled_program(bpte)
    if len(bp.method_test_suites) != 1:
        raise AotError(f"the bundled program has {len(bp.method_test_suites)} test suites; one is supported")
    suite = bp.method_test_suites[0]
    if not 0 <= case < len(suite.test_cases):
        raise AotError(f"test case {case} does not exist ({len(suite.test_cases)} cases)")
    program = bytes(bp.program)
    plan = deserialize_pte_binary(program).program.execution_plan[0]
    tc = suite.test_cases[case]

    def tensors(vals: Any, idx: list[int], what: str) -> list[TensorBytes]:
        if len(vals) != len(idx):
            raise AotError(f"the test case has {len(vals)} {what}s, the program {len(idx)}")
        out = []
        for k, (v, vi) in enumerate(zip(vals, idx)):
            planned = plan.values[vi].val
            if not isinstance(planned, Tensor):
                raise AotError(f"{what} {k} is not a tensor: only tensor {what}s are supported")
            out.append(_relayout(v.val, planned, f"{what} {k}"))
        return out

    return BundledCase(program, tensors(tc.inputs, list(plan.inputs), "input"),
                       tensors(tc.expected_outputs, list(plan.outputs), "output"), suite.method_name)
