"""The outputs a runner saved (output_<i>.bin, in memory order) as .npy files (logical order, contiguous), with
the dtype, shape and dim order the bundled program gives each output. Used by every simulator (--save-outputs)."""

from __future__ import annotations

from pathlib import Path

_NP_DTYPES = {0: "uint8", 1: "int8", 2: "int16", 3: "int32", 4: "int64", 5: "float16", 6: "float32", 7: "float64", 11: "bool"}


def _suite_method_name(data: bytes) -> str | None:
    """Method name of test suite 0, read straight from the flatbuffer (the
    generated accessors for nested tables are broken in this wheel)."""
    import struct

    def table(pos: int) -> tuple[int, list[int]]:
        vt = pos - struct.unpack_from("<i", data, pos)[0]
        vlen = struct.unpack_from("<H", data, vt)[0]
        return pos, [struct.unpack_from("<H", data, vt + 4 + 2 * k)[0] for k in range((vlen - 4) // 2)]

    def ref(pos: int) -> int:
        return pos + struct.unpack_from("<I", data, pos)[0]

    root, fields = table(struct.unpack_from("<I", data, 0)[0])
    if len(fields) < 2 or not fields[1]:  # BundledProgram.method_test_suites
        return None
    vec = ref(root + fields[1])
    if struct.unpack_from("<I", data, vec)[0] == 0:
        return None
    suite, sf = table(ref(vec + 4))
    if not sf or not sf[0]:  # BundledMethodTestSuite.method_name
        return None
    s = ref(suite + sf[0])
    n = struct.unpack_from("<I", data, s)[0]
    return data[s + 4 : s + 4 + n].decode()


def _method_outputs(bpte_path: Path) -> list[tuple[str, list[int], list[int]]]:
    """(numpy dtype, sizes, dim_order) of each output of the bundled method."""
    from executorch.devtools.bundled_program.serialize.generated.bundled_program_flatbuffer.BundledProgram import (
        BundledProgram,
    )
    from executorch.exir._serialize._program import deserialize_pte_binary
    from executorch.exir.schema import Tensor

    data = bpte_path.read_bytes()
    if data[4:8] != b"BP08":
        raise ValueError(f"{bpte_path}: not a bundled program (identifier {data[4:8]!r}, expected b'BP08')")
    bp = BundledProgram.GetRootAs(data, 0)
    program = deserialize_pte_binary(bytes(bp.ProgramAsNumpy())).program
    method = _suite_method_name(data) or "forward"
    plans = [p for p in program.execution_plan if p.name == method]
    if not plans:
        raise ValueError(f"{bpte_path}: program has no method {method!r}")
    plan = plans[0]
    outs = []
    for idx in plan.outputs:
        val = plan.values[idx].val
        if not isinstance(val, Tensor):
            raise ValueError(f"{bpte_path}: output value {idx} is not a tensor")
        st = int(val.scalar_type)
        if st not in _NP_DTYPES:
            raise ValueError(f"{bpte_path}: output value {idx} has unsupported dtype {st}")
        dim_order = list(val.dim_order) if val.dim_order else list(range(len(val.sizes)))
        outs.append((_NP_DTYPES[st], list(val.sizes), dim_order))
    return outs


def save_outputs_npy(raw_dir: Path | str, bpte_path: Path | str, out_dir: Path | str) -> list[Path]:
    """Convert the runner's output_<i>.bin (memory order) to output_<i>.npy (logical, contiguous)."""
    import numpy as np

    raw_dir, out_dir = Path(raw_dir), Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for i, (dtype, sizes, order) in enumerate(_method_outputs(Path(bpte_path))):
        raw = raw_dir / f"output_{i}.bin"
        if not raw.is_file():
            raise FileNotFoundError(f"{raw}: missing; run the runner with --save-outputs {raw_dir}")
        data = np.frombuffer(raw.read_bytes(), dtype=dtype)
        want = int(np.prod(sizes)) if sizes else 1
        if data.size != want:
            raise ValueError(f"{raw}: {data.size} elements, the program's output {i} has {want}")
        # Memory holds dims in dim_order (outermost first); transpose back to logical order.
        arr = data.reshape([sizes[d] for d in order]) if sizes else data.reshape(())
        arr = np.ascontiguousarray(arr.transpose(np.argsort(order))) if sizes else arr
        path = out_dir / f"output_{i}.npy"
        np.save(path, arr)
        written.append(path)
    return written
