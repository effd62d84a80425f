"""Write the program (.pte), the bundled program (.bpte) and the report (.json)."""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any, Sequence

import torch
from executorch.devtools import BundledProgram
from executorch.devtools.bundled_program.config import MethodTestCase, MethodTestSuite
from executorch.devtools.bundled_program.serialize import serialize_from_bundled_program_to_flatbuffer


def atomic_write(path: Path, data: bytes) -> None:
    """Write then rename: an interrupted run never leaves a half file that a later run would trust."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_pte(program: Any, path: Path) -> int:
    data = program.buffer
    atomic_write(path, data)
    return len(data)


def bundle(program: Any, cases: Sequence[tuple[tuple[torch.Tensor, ...], Sequence[torch.Tensor]]]) -> BundledProgram:
    """The program with test cases: inputs and the lowered program's own outputs."""
    tests = [MethodTestCase(inputs=list(inp), expected_outputs=list(out)) for inp, out in cases]
    return BundledProgram(program, [MethodTestSuite(method_name="forward", test_cases=tests)])


def bpte_bytes(bundled: BundledProgram) -> bytes:
    return serialize_from_bundled_program_to_flatbuffer(bundled)


def write_etrecord(edge_before_emit: Any, bundled: BundledProgram, path: Path) -> str | None:
    """ExecuTorch's ETRecord for the Inspector: the edge program (a copy taken before to_executorch),
    the emitted program's debug-handle and delegate maps, and the bundled reference outputs.
    Returns None when written, else why not (the compile goes on without it)."""
    from executorch.devtools import generate_etrecord

    try:
        generate_etrecord(str(path), edge_before_emit, bundled)
    except Exception as exc:  # ExecuTorch's serialiser may refuse an unusual graph; the program is still good
        path.unlink(missing_ok=True)
        return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return None


def _json_safe(obj: Any) -> Any:
    if isinstance(obj, float) and (math.isinf(obj) or math.isnan(obj)):
        return None if math.isnan(obj) else ("inf" if obj > 0 else "-inf")
    if isinstance(obj, dict):
        return {k: _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    return obj


def write_report(report: dict[str, Any], path: Path) -> None:
    atomic_write(path, (json.dumps(_json_safe(report), indent=2) + "\n").encode())
