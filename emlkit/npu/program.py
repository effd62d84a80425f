"""Whole programs on the host: the CPU ops of a .pte through their Python references, Ethos-U delegates
on the functional model.

This is the host-side stand-in for the device: it walks the program's instruction
list like the firmware does (KernelCall / DelegateCall / jumps are not used by
these programs), so its outputs are what the device is expected to produce.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np
import torch

from emlkit.npu.errors import NpuError
from emlkit.npu.execute import TraceEntry
from emlkit.npu.run import run_blob
from emlkit.reference import ORDER_OPS_ON_CODES

log = logging.getLogger(__name__)

# ExecuTorch ScalarType codes -> torch dtypes (executorch/exir/scalar_type.py).
_SCALAR = {0: torch.uint8, 1: torch.int8, 2: torch.int16, 3: torch.int32, 4: torch.int64, 6: torch.float32,
           7: torch.float64, 11: torch.bool}
LABEL = "host ({npu} functional model)"


@dataclass
class ProgramRun:
    outputs: list[torch.Tensor]
    traces: list[list[TraceEntry]] = field(default_factory=list)   # one per delegate call
    npus: list[str] = field(default_factory=list)                  # the NPU each delegate call ran on
    delegate_inputs: list[list[np.ndarray]] = field(default_factory=list)  # what each delegate call was given
    delegate_args: list[list[torch.Tensor]] = field(default_factory=list)  # the same in logical (NCHW) order


def _order(t: Any) -> list[int]:
    """A serialized tensor's dim order (the order its bytes are laid out in); absent means contiguous."""
    order = [int(d) for d in (t.dim_order or [])]
    return order if len(order) == len(t.sizes) else list(range(len(t.sizes)))


def to_memory(t: torch.Tensor, order: Sequence[int]) -> np.ndarray:
    """A logical tensor -> its bytes as the device holds them: dims permuted into dim order, contiguous."""
    return t.permute(list(order)).contiguous().numpy()


def from_memory(raw: torch.Tensor, sizes: Sequence[int], order: Sequence[int]) -> torch.Tensor:
    """Bytes laid out in dim order -> the logical tensor of the given sizes."""
    laid = raw.reshape([int(sizes[d]) for d in order])
    return laid.permute([list(order).index(i) for i in range(len(order))]).contiguous()


def _load_program(pte: bytes) -> Any:
    from executorch.exir._serialize._program import deserialize_pte_binary

    if len(pte) < 8 or pte[4:8] != b"ET12":
        raise NpuError("not an ExecuTorch program: identifier ET12 missing at byte 4 (give a .pte, or a .bpte to run_bundled)")
    try:
        return deserialize_pte_binary(pte).program
    except Exception as exc:
        raise NpuError(f"the .pte does not parse: {type(exc).__name__}: {exc}") from exc


def _cortex_m_ops() -> None:
    # Importing the passes package first resolves the ops module's circular imports; it registers torch.ops.cortex_m.*.
    from executorch.backends.cortex_m.passes.replace_quant_nodes_pass import ReplaceQuantNodesPass  # noqa: F401
    import emlkit.emlkit_ops  # noqa: F401  our emlkit:: ops (int8 upsample, layer norm) may be in the CPU part



def _call_overload(fn: Any, idx: Sequence[int], arg: Callable[[int, Any], Any], values: list[Any]) -> Any:
    """An out-variant overload called with the instruction's arguments in schema order, its out last."""
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for i, s in zip(idx, fn._schema.arguments):
        v = values[i] if s.is_out else arg(i, s.type)
        if s.kwarg_only:
            kwargs[s.name] = v
        else:
            args.append(v)
    res = _on_codes(fn, args, kwargs) if fn._schema.name in ORDER_OPS_ON_CODES else fn(*args, **kwargs)
    return res if isinstance(res, torch.Tensor) else res[0]


def _on_codes(fn: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    """An element-picking out-variant op on integer codes, which torch's CPU kernels refuse: run in float32 (every
    int8/int16 code exact), the values copied into the program's own out tensors, which it returns."""
    x = args[0]
    if not isinstance(x, torch.Tensor) or x.dtype.is_floating_point:
        return fn(*args, **kwargs)
    narrow = [k for k, v in kwargs.items() if isinstance(v, torch.Tensor) and v.dtype == x.dtype]
    wide = {**kwargs, **{k: torch.empty(kwargs[k].shape) for k in narrow}}
    fn(x.to(torch.float32), *args[1:], **wide)
    for k in narrow:
        kwargs[k].copy_(wide[k])
    return tuple(v for v in kwargs.values() if isinstance(v, torch.Tensor))


def run_pte(pte: bytes, inputs: Sequence[torch.Tensor], trace: bool = False,
            on_op: Callable[[int, TraceEntry], None] | None = None) -> ProgramRun:
    """Execute a .pte's forward method; Ethos-U delegates run on the functional model.

    inputs: user inputs in program order. trace: keep each NPU command's OFM in the returned traces.
    on_op(delegate_index, entry) is called after each NPU command.
    """
    _cortex_m_ops()
    run = _HostRun(_load_program(pte), trace, on_op)
    run.set_inputs(inputs)
    for chain in run.plan.chains:
        for ins in chain.instructions:
            a = ins.instr_args
            kind = type(a).__name__
            if kind == "KernelCall":
                run.kernel_call(a)
            elif kind == "DelegateCall":
                run.delegate_call(a)
            else:
                raise NpuError(f"instruction {kind} is not handled by the host executor")
    return ProgramRun([run.values[i] for i in run.plan.outputs], run.traces, run.npus, run.delegate_inputs,
                      run.delegate_args)


class _HostRun:
    """One execution of a program's forward method: its values, and the NPU traces of its delegate calls."""

    def __init__(self, program: Any, trace: bool, on_op: Callable[[int, TraceEntry], None] | None) -> None:
        self.program = program
        self.plan = program.execution_plan[0]
        self.trace = trace
        self.on_op = on_op
        self.values: list[Any] = [self._initial(i, v.val) for i, v in enumerate(self.plan.values)]
        self.traces: list[list[TraceEntry]] = []
        self.npus: list[str] = []
        self.delegate_inputs: list[list[np.ndarray]] = []
        self.delegate_args: list[list[torch.Tensor]] = []
        # A static view (a reshape the memory planner gave its input's bytes, with no instruction of its own) is
        # another value at the same planned address: whatever writes one writes the others, as on the device.
        self.at: dict[tuple[int, int, int], list[int]] = {}
        for i, v in enumerate(self.plan.values):
            t = v.val
            if type(t).__name__ == "Tensor" and t.allocation_info is not None and list(t.dim_order) == sorted(t.dim_order):
                a_i = t.allocation_info
                self.at.setdefault((a_i.memory_id, a_i.memory_offset_low, a_i.memory_offset_high), []).append(i)

    def _const_tensor(self, t: Any) -> torch.Tensor | None:
        program = self.program
        if t.data_buffer_idx <= 0 or t.allocation_info is not None:
            return None
        if t.data_buffer_idx >= len(program.constant_buffer) or not program.constant_buffer[t.data_buffer_idx].storage:
            raise NpuError("program constants live in a segment outside the flatbuffer: recompile with inline constants")
        raw = bytes(program.constant_buffer[t.data_buffer_idx].storage)
        dt = _SCALAR[int(t.scalar_type)]
        n = int(np.prod(t.sizes)) if t.sizes else 1
        return torch.frombuffer(bytearray(raw), dtype=dt)[:n].reshape(list(t.sizes)).clone()

    def _initial(self, i: int, val: Any) -> Any:
        """Value I before the run: a constant's data, zeros for a planned tensor, a scalar, or a marked list."""
        kind = type(val).__name__
        if kind == "Tensor":
            c = self._const_tensor(val)
            if c is not None:
                return c
            st = int(val.scalar_type)
            if st not in _SCALAR:
                raise NpuError(f"value {i} has scalar type {st}, which the host executor does not handle")
            return torch.zeros(list(val.sizes), dtype=_SCALAR[st])
        if kind in ("Int", "Double", "Bool"):
            return getattr(val, {"Int": "int_val", "Double": "double_val", "Bool": "bool_val"}[kind])
        if kind == "IntList":
            return ("intlist", list(val.items))
        if kind == "Null":
            return None
        return ("unsupported", kind)

    def set_inputs(self, inputs: Sequence[torch.Tensor]) -> None:
        plan, values = self.plan, self.values
        if len(inputs) != len(plan.inputs):
            raise NpuError(f"the program takes {len(plan.inputs)} inputs, {len(inputs)} were given")
        for idx, t in zip(plan.inputs, inputs):
            want = values[idx]
            if tuple(want.shape) != tuple(t.shape):
                raise NpuError(f"input value {idx}: shape {tuple(t.shape)} given, the program takes {tuple(want.shape)}")
            values[idx] = t.to(want.dtype).clone()
        for idx in plan.inputs:
            self.share(idx)

    def share(self, oid: int) -> None:
        """Value OID was written: the other values at its planned address see the same bytes."""
        values = self.values
        a_i = getattr(self.plan.values[oid].val, "allocation_info", None)
        if a_i is None or not isinstance(values[oid], torch.Tensor):
            return
        for j in self.at.get((a_i.memory_id, a_i.memory_offset_low, a_i.memory_offset_high), []):
            other = values[j]
            if j != oid and isinstance(other, torch.Tensor) and other.dtype == values[oid].dtype \
                    and other.numel() == values[oid].numel() and values[oid].is_contiguous():
                values[j] = values[oid].reshape(other.shape).clone()

    def arg(self, i: int, schema_type: Any = None) -> Any:
        v = self.values[i]
        if isinstance(v, tuple) and v and v[0] == "intlist":
            return [self.values[j] for j in v[1]]
        if isinstance(v, tuple) and v and v[0] == "unsupported":
            raise NpuError(f"value {i} is a {v[1]}, which the host executor does not handle")
        if schema_type is not None and "ScalarType" in str(schema_type) and isinstance(v, int):
            return _SCALAR[v]
        return v

    def kernel_call(self, a: Any) -> None:
        """A CPU op through its Python reference."""
        from emlkit import exact_int_conv

        op = self.plan.operators[a.op_index]
        ns, name = op.name.split("::", 1)
        try:
            packet = getattr(getattr(torch.ops, ns), name)
        except AttributeError:
            raise NpuError(f"CPU op {op.name} has no host implementation") from None
        # aten::select_copy has no default overload, only int and int_out (an LSTMCell's h on the CPU)
        fn = packet.default if "default" in packet.overloads() else None
        schema = fn._schema.arguments if fn is not None else []
        # The call's arguments are its overload's (e.g. mean.dtype_out: dim, keepdim, dtype, out;
        # upsample_nearest2d.vec_out: output_size, scale_factors, out, as many as the default's four;
        # dim_order_ops::_to_dim_order_copy.out, an embedding's index cast, fewer), then the result: call
        # that overload with its keyword-only arguments and out. cortex_m:: and emlkit:: calls carry the
        # default's arguments, their outs and the result.
        named = getattr(packet, op.overload, None) if op.overload else None
        fits = named is not None and len(named._schema.arguments) + 1 == len(a.args)
        if named is not None and (fn is None or ns == "aten" and len(a.args) != len(schema) + 1
                                  or fits and (ns == "aten" or len(a.args) < len(schema) + 1)):
            self.values[a.args[-1]] = _call_overload(named, a.args, self.arg, self.values)
            self.share(a.args[-1])
            return
        if fn is None:
            raise NpuError(f"CPU op {op.name}.{op.overload} has no host implementation")
        args = [self.arg(i, s.type) for i, s in zip(a.args, schema)]
        res = exact_int_conv.call(fn, args, {})   # dilated integer convs computable on the CPU
        results = [res] if isinstance(res, torch.Tensor) else list(res)
        # out tensors follow the default's arguments, the call's result last: an op with several outputs (an
        # LSTM's y and cell) has as many outs, each written
        outs = a.args[len(schema):-1] if len(a.args) > len(schema) + 1 else a.args[len(schema):len(schema) + 1]
        for out_idx, value in zip(outs, results):
            self.values[out_idx] = value
            self.share(out_idx)

    def delegate_call(self, a: Any) -> None:
        """An Ethos-U delegate on the functional model."""
        from emlkit.npu.blob import parse_blob

        plan, values = self.plan, self.values
        d = plan.delegates[a.delegate_index]
        if d.id != "EthosUBackend":
            raise NpuError(f"delegate {d.id} cannot run on the host: only EthosUBackend has a functional model")
        if int(d.processed.location) != 0:
            raise NpuError("delegate data is in a segment outside the flatbuffer: compile with "
                           "extract_delegate_segments=False")
        vb = parse_blob(bytes(self.program.backend_delegate_data[d.processed.index].data))
        n_in = len(vb.inputs)
        # The delegate reads and writes memory: each tensor in its program dim order (NHWC for a
        # channels-last value), not in the logical NCHW order the host keeps values in.
        ins_np = [to_memory(values[i], _order(plan.values[i].val)) for i in a.args[:n_in]]
        out_ids = a.args[n_in:]
        di = len(self.traces)
        on_op = self.on_op
        outs, tr = run_blob(vb, ins_np, keep=self.trace, on_op=(lambda e, di=di: on_op(di, e)) if on_op else None)
        self.traces.append(tr)
        self.npus.append(vb.config.product_name if vb.config is not None else "Ethos-U55")
        self.delegate_inputs.append(ins_np)
        self.delegate_args.append([values[i] for i in a.args[:n_in]])
        if len(outs) != len(out_ids):
            raise NpuError(f"delegate {a.delegate_index} produced {len(outs)} outputs, the program expects {len(out_ids)}")
        for oid, o in zip(out_ids, outs):
            like = values[oid]
            raw = torch.from_numpy(np.ascontiguousarray(o)).to(like.dtype)
            values[oid] = from_memory(raw, like.shape, _order(plan.values[oid].val))
            self.share(oid)


def _bp_tensor(t: Any) -> torch.Tensor:
    dt = _SCALAR[int(t.scalar_type)]
    return from_memory(torch.frombuffer(bytearray(bytes(t.data)), dtype=dt), list(t.sizes), _order(t))


def run_bundled(bpte: bytes, trace: bool = False) -> dict[str, Any]:
    """Run every test case of a .bpte; returns a result in the runner's JSON contract plus "executor" and
    "runs" (one ProgramRun per case, for traces; drop it before printing JSON)."""
    from executorch.devtools.bundled_program.serialize import deserialize_from_flatbuffer_to_bundled_program

    if len(bpte) < 8 or bpte[4:8] != b"BP08":
        raise NpuError("not a bundled program: identifier BP08 missing at byte 4")
    bp = deserialize_from_flatbuffer_to_bundled_program(bpte)
    pte = bytes(bp.program)
    cases = bp.method_test_suites[0].test_cases
    per_out: list[dict[str, float]] = []
    ok = True
    traces = []
    for tc in cases:
        ins = [_bp_tensor(v.val) for v in tc.inputs]
        run = run_pte(pte, ins, trace=trace)
        traces.append(run)
        for j, (got, want_v) in enumerate(zip(run.outputs, tc.expected_outputs)):
            want = _bp_tensor(want_v.val)
            diff = (got.double() - want.double()).abs()
            max_abs = float(diff.max()) if diff.numel() else 0.0
            step = _step(got, want)
            entry = {"max_abs": max_abs, "max_steps": step}
            if j < len(per_out):
                per_out[j] = {k: max(per_out[j][k], entry[k]) for k in entry}
            else:
                per_out.append(entry)
            ok = ok and max_abs == 0.0
    npus = sorted({n for r in traces for n in r.npus}) or ["Ethos-U"]
    return {"status": "pass" if ok else "mismatch", "cases": len(cases), "outputs": per_out,
            "executor": LABEL.format(npu="/".join(npus)), "runs": traces}


def _step(got: torch.Tensor, want: torch.Tensor) -> int:
    """Difference in quantization steps: exact for integer outputs, estimated from the value grid for floats."""
    if not got.dtype.is_floating_point:
        return int((got.long() - want.long()).abs().max()) if got.numel() else 0
    vals = torch.unique(want.double())
    grid = float((vals[1:] - vals[:-1]).min()) if vals.numel() > 1 else 0.0
    if grid <= 0:
        return 0 if torch.equal(got, want) else -1
    return int(round(float((got.double() - want.double()).abs().max()) / grid))
