"""LUT fusion on Ethos-U (emlkit/passes/lut_ethos_u.py): TOSA TABLE int8/int16, exact tables, fewer NPU ops."""

from __future__ import annotations

from typing import Any, Callable

import pytest
import torch
import torch.nn as nn
from hypothesis import given, settings, strategies as st

from emlkit.compile import make_options  # noqa: F401  (loads the cortex_m op library in a working order)
from emlkit.lower import ethos_u
from emlkit.passes.lut_ethos_u import EthosULut, INT16_ENTRIES, int16_table_lookup
from emlkit.passes.lut_fusion import LutFusion
from emlkit.reference import run_tosa
from emlkit.targets import get_target

aten = torch.ops.aten
qd = torch.ops.quantized_decomposed
U55 = get_target("ethos-u55-128")
U55_A16 = get_target("ethos-u55-128-a16w8")


# --------------------------------------------------------------- independent references

def ref_dequantize(codes: torch.Tensor, s: float, zp: int) -> torch.Tensor:
    return (codes.to(torch.float32) - zp) * s


def ref_quantize(y: torch.Tensor, s: float, zp: int, qmin: int, qmax: int) -> torch.Tensor:
    return torch.clamp(torch.round(y.to(torch.float32) * (1.0 / s)) + zp, qmin, qmax).to(torch.int64)


def int16_sample_codes() -> torch.Tensor:
    return torch.arange(INT16_ENTRIES, dtype=torch.int64) * 128 - 32768


def tosa_int16(x: int, t: list[int]) -> int:
    """TOSA spec TABLE int16 for one code, then RESCALE by 2**-7 with single rounding, in Python ints."""
    u = x + 32768
    i, frac = u >> 7, u & 0x7F
    v = (t[i] << 7) + (t[i + 1] - t[i]) * frac
    return (v * (1 << 30) + (1 << 36)) >> 37


def synthetic(ops: list[tuple[Any, Any]], s_in: float, zp_in: int, s_out: float, zp_out: int,
              dtype: torch.dtype = torch.int8, quantized_consts: bool = False) -> torch.fx.GraphModule:
    """x_q -> dq -> op1 -> ... -> q, the shape of a converted pt2e graph; constants either float
    buffers (Cortex-M quantizer) or dequantized int8 constants (Arm quantizer)."""
    info = torch.iinfo(dtype)
    root = nn.Module()
    g = torch.fx.Graph()
    x = g.placeholder("x")
    cur = g.call_function(qd.dequantize_per_tensor.default, (x, s_in, zp_in, info.min, info.max, dtype))
    for i, (target, const) in enumerate(ops):
        if const is None:
            cur = g.call_function(target, (cur,))
            continue
        side, value = const
        name = f"c{i}"
        if quantized_consts:
            cs = max(abs(value), 1e-3) / 127.0
            root.register_buffer(name, torch.tensor(int(round(value / cs)), dtype=torch.int8))
            c = g.call_function(qd.dequantize_per_tensor.default, (g.get_attr(name), cs, 0, -128, 127, torch.int8))
        else:
            root.register_buffer(name, torch.tensor(float(value)))
            c = g.get_attr(name)
        cur = g.call_function(target, (c, cur) if side else (cur, c))
    q = g.call_function(qd.quantize_per_tensor.default, (cur, s_out, zp_out, info.min, info.max, dtype))
    g.output(q)
    return torch.fx.GraphModule(root, g)


def const_value(value: float, quantized: bool) -> torch.Tensor:
    """The constant as the graph holds it: a float buffer, or dequantize(int8 code) in float32."""
    if not quantized:
        return torch.tensor(float(value))
    cs = max(abs(value), 1e-3) / 127.0
    return (torch.tensor(int(round(value / cs)), dtype=torch.int8).to(torch.float32) - 0) * cs


UNARY: list[tuple[Any, Callable[[torch.Tensor], torch.Tensor]]] = [
    (aten.sigmoid.default, torch.sigmoid), (aten.tanh.default, torch.tanh), (aten.relu.default, torch.relu),
    (aten.neg.default, torch.neg), (aten.abs.default, torch.abs),
    (aten.hardsigmoid.default, nn.functional.hardsigmoid), (aten.hardswish.default, nn.functional.hardswish),
    (aten.silu.default, nn.functional.silu), (aten.erf.default, torch.erf),
]
BINARY: list[tuple[Any, Callable[[torch.Tensor, float, bool], torch.Tensor]]] = [
    (aten.add.Tensor, lambda v, c, left: c + v), (aten.sub.Tensor, lambda v, c, left: c - v if left else v - c),
    (aten.mul.Tensor, lambda v, c, left: c * v),
]


@st.composite
def chains(draw: Any) -> tuple[list[tuple[Any, Any]], list[Any]]:
    ops, fns = [], []
    for _ in range(draw(st.integers(1, 4))):
        if draw(st.booleans()):
            target, f = draw(st.sampled_from(UNARY))
            ops.append((target, None))
            fns.append((f, None))
        else:
            target, f = draw(st.sampled_from(BINARY))
            c = draw(st.floats(-3, 3, allow_nan=False).filter(lambda v: abs(v) > 1e-2))
            left = draw(st.booleans())
            ops.append((target, (int(left), c)))
            fns.append((f, (c, left)))
    return ops, fns


def compose(fns: list[Any], quantized: bool) -> Callable[[torch.Tensor], torch.Tensor]:
    def run(v: torch.Tensor) -> torch.Tensor:
        for i, (f, extra) in enumerate(fns):
            if extra is None:
                v = f(v)
            else:
                c, left = extra
                v = f(v, const_value(c, quantized), left)
        return v
    return run


def fuse(gm: torch.fx.GraphModule, backend: Any = None) -> LutFusion:
    # Default: a table for every region, so the tables themselves are what is tested.
    p = LutFusion(backend=backend or EthosULut(skip_native_alone=False, int16_max_steps=None))
    p(gm)
    return p


def fused_table(gm: torch.fx.GraphModule) -> torch.Tensor:
    node = next(n for n in gm.graph.nodes if n.op == "call_function")
    assert node.target is torch.ops.aot.table.default, gm.graph
    return getattr(gm, node.args[1].target)


# --------------------------------------------------------------- exhaustive tables (synthetic graphs)

@settings(max_examples=40, deadline=None)
@given(chains(), st.booleans(), st.floats(0.005, 0.2), st.integers(-20, 20), st.floats(0.005, 0.2),
       st.integers(-20, 20))
def test_int8_tables_exact(chain: Any, qconst: bool, s_in: float, zp_in: int, s_out: float, zp_out: int) -> None:
    from executorch.backends.arm._passes.insert_table_ops import InsertTableOpsPass
    from executorch.backends.arm._passes.quant_args import QuantArgs

    ops, fns = chain
    gm = synthetic(ops, s_in, zp_in, s_out, zp_out, quantized_consts=qconst)
    p = fuse(gm)
    assert len(p.last.regions) == 1 and p.last.regions[0]["table_entries"] == 256
    assert sum(1 for n in gm.graph.nodes if n.op == "call_function") == 1
    table = fused_table(gm)
    fn = compose(fns, qconst)
    codes = torch.arange(-128, 128, dtype=torch.int64)
    want = ref_quantize(fn(ref_dequantize(codes, s_in, zp_in)), s_out, zp_out, -128, 127)
    if bool(torch.isnan(fn(ref_dequantize(codes, s_in, zp_in))).any()):
        return  # undefined entries are filled, not computed: nothing exact to compare
    assert table.tolist() == want.tolist()
    # Arm's own table builder, given the whole chain as its op, computes the same table.
    arm, shift = object.__new__(InsertTableOpsPass).generate_8bit_table_values(
        fn, QuantArgs(s_in, zp_in, -128, 127, torch.int8), QuantArgs(s_out, zp_out, -128, 127, torch.int8))
    assert shift == 0 and arm.tolist() == table.tolist()
    # The fused op looks every code up in that table.
    assert gm(codes.to(torch.int8)).tolist() == want.tolist()


@settings(max_examples=25, deadline=None)
@given(chains(), st.floats(1e-5, 3e-4), st.floats(1e-5, 3e-4))
def test_int16_tables_exact_and_interpolated_like_tosa(chain: Any, s_in: float, s_out: float) -> None:
    ops, fns = chain
    qmin, qmax = -32767, 32767                    # A16W8: symmetric int16, zero point 0
    gm = synthetic(ops, s_in, 0, s_out, 0, torch.int16, quantized_consts=True)
    for n in gm.graph.nodes:                       # the A16W8 activation range
        if n.op == "call_function" and n.args[-1] == torch.int16:
            n.args = (*n.args[:3], qmin, qmax, torch.int16)
    p = fuse(gm)
    assert len(p.last.regions) == 1 and p.last.regions[0]["table_entries"] == INT16_ENTRIES
    table = fused_table(gm)
    assert table.dtype == torch.int16 and table.numel() == INT16_ENTRIES
    fn = compose(fns, True)
    y = fn(ref_dequantize(int16_sample_codes(), s_in, 0))
    if bool(torch.isnan(y).any()):
        return
    # Entry i is the chain at code -32768 + 128 i (the last one at the virtual code 32768).
    assert table.tolist() == ref_quantize(y, s_out, 0, qmin, qmax).tolist()
    # Every int16 code: the fused op computes what TOSA TABLE + RESCALE(2**-7) define.
    codes = torch.arange(qmin, qmax + 1, dtype=torch.int64)
    got = gm(codes.to(torch.int16)).to(torch.int64)
    t = table.tolist()
    sample = codes[:: 257].tolist() + [qmin, qmax, -1, 0, 1]
    assert [int(got[c - qmin]) for c in sample] == [tosa_int16(c, t) for c in sample]
    assert torch.equal(got, int16_table_lookup(codes, table).to(torch.int64))
    # Interpolated values stay between neighbouring entries' outputs (no overflow or wrap).
    lo = torch.minimum(table[:-1], table[1:]).to(torch.int64).repeat_interleave(128)[codes + 32768]
    hi = torch.maximum(table[:-1], table[1:]).to(torch.int64).repeat_interleave(128)[codes + 32768]
    assert bool(((got >= lo) & (got <= hi)).all())


def test_int16_left_alone_when_backend_cannot_take_it() -> None:
    gm = synthetic([(aten.sigmoid.default, None)], 1e-4, 0, 3e-5, 0, torch.int16)
    p = fuse(gm, EthosULut(int16=False))
    assert p.last.regions == [] and "int16" in p.last.skipped[0]["reason"]
    assert any(n.target is aten.sigmoid.default for n in gm.graph.nodes)


def test_lone_scalar_op_or_clamp_left_to_the_backend() -> None:
    for ops in ([(aten.mul.Tensor, (0, 0.5))], [(aten.clamp.default, None)]):
        gm = synthetic(ops, 0.05, 0, 0.01, 0)
        if ops[0][0] is aten.clamp.default:
            node = next(n for n in gm.graph.nodes if n.target is aten.clamp.default)
            node.args = (node.args[0], -1.0, 1.0)
            gm.recompile()
        p = fuse(gm, EthosULut())
        assert p.last.regions == [] and "would not remove an op" in p.last.skipped[0]["reason"]
    gm = synthetic([(aten.mul.Tensor, (0, 0.5)), (aten.add.Tensor, (0, 0.25))], 0.05, 0, 0.01, 0)
    assert len(fuse(gm, EthosULut()).last.regions) == 1          # two ops: one table removes one op


def test_int16_kink_left_alone_smooth_chain_fused() -> None:
    # relu's kink at code 50 falls between two table entries (-32768 + 128 i): interpolation cuts the corner.
    kinked = synthetic([(aten.relu.default, None), (aten.mul.Tensor, (0, 2.0))], 1e-4, 50, 5e-5, 0, torch.int16)
    p = fuse(kinked, EthosULut())
    assert p.last.regions == [] and "steps off" in p.last.skipped[0]["reason"]
    smooth = synthetic([(aten.sigmoid.default, None), (aten.mul.Tensor, (0, 2.0))], 1e-4, 0, 7e-5, 0, torch.int16)
    assert len(fuse(smooth, EthosULut()).last.regions) == 1


def test_mixed_dtypes_left_alone() -> None:
    gm = synthetic([(aten.tanh.default, None)], 0.05, 0, 0.01, 0)
    q = next(n for n in gm.graph.nodes if n.target is qd.quantize_per_tensor.default)
    q.args = (q.args[0], 1e-4, 0, -32768, 32767, torch.int16)
    p = fuse(gm)
    assert p.last.regions == [] and "same type" in p.last.skipped[0]["reason"]


# --------------------------------------------------------------- through the Arm pipeline and Vela

class ChainOnly(nn.Module):
    """The chain right after the input quantization: the delegate is the table alone."""

    def __init__(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fn(x)


def lower_chain(fn: Callable[[torch.Tensor], torch.Tensor], target: Any, shape: tuple[int, ...], fusion: bool) -> Any:
    torch.manual_seed(1)
    x = (torch.rand(*shape) * 8.0 - 4.0,)
    opts = make_options(lut_fusion=fusion, allow_float=True)
    with torch.no_grad():
        return ethos_u.lower(ChainOnly(fn).eval(), x, [x], target, opts)


def tosa_ops(tosa: bytes) -> list[str]:
    import os
    import tempfile

    import tosa_serializer as ts  # type: ignore[import-not-found]

    ser = ts.TosaSerializer("")
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "g.tosa")
        with open(path, "wb") as f:
            f.write(tosa)
        assert ser.loadTosaFlatbuffer(path)
    return [str(op.op).removeprefix("Op.") for op in ser.regions[0].basicBlocks[0].operators
            if str(op.op) not in ("Op.CONST", "Op.CONST_SHAPE")]


def chain_fn(t: torch.Tensor) -> torch.Tensor:
    return torch.sigmoid(t) * 2.0 + 0.5


@pytest.mark.parametrize("target,shape", [(U55, (1, 256)), (U55_A16, (256, 256))], ids=["int8", "int16"])
def test_tosa_table_on_reference_model(target: Any, shape: tuple[int, ...]) -> None:
    """The delegate is TABLE (+ RESCALE for int16); on tosa_reference_model every code gives our table's value."""
    low = lower_chain(chain_fn, target, shape, True)
    region = low.extra["lut_fusion"]["regions"][0]
    assert region["chain"] == ["sigmoid.default", "mul.Tensor(2)", "add.Tensor(0.5)"]
    (part,) = low.extra["vela_partitions"]
    ops = tosa_ops(part.tosa)
    assert ops == (["TABLE"] if target is U55 else ["TABLE", "RESCALE"]), ops
    s_in, zp_in, qmin_in, qmax_in = region["in_qparams"]
    s_out, zp_out, qmin, qmax = region["out_qparams"]
    if target is U55:
        codes = torch.arange(-128, 128, dtype=torch.int64)
        table = ref_quantize(chain_fn(ref_dequantize(codes.clamp(qmin_in, qmax_in), s_in, zp_in)), s_out, zp_out,
                             qmin, qmax)
        x = codes.to(torch.int8).reshape(shape)
        want = table
    else:
        table = ref_quantize(chain_fn(ref_dequantize(int16_sample_codes(), s_in, zp_in)), s_out, zp_out, qmin, qmax)
        codes = torch.arange(-32768, 32768, dtype=torch.int64)
        x = codes.to(torch.int16).reshape(shape)
        t = table.tolist()
        want = torch.tensor([tosa_int16(c, t) for c in codes.tolist()])
    (out,) = run_tosa(part.tosa, [x], [x])
    assert out.flatten().to(torch.int64).tolist() == want.tolist()


@pytest.fixture(scope="module")
def zoo_u55(compiled: Any) -> tuple[Any, Any]:
    return compiled("lut_activations", "ethos-u55-128", True), compiled("lut_activations", "ethos-u55-128", False)


def _delegated(rep: dict[str, Any]) -> int:
    return sum(rep["delegated_ops"].values())


def test_lut_activations_u55_fewer_npu_ops_cycles_and_not_less_accurate(zoo_u55: Any) -> None:
    on, off = (r.report for r in zoo_u55)
    assert on["lut_fusion"]["regions_fused"] == 2
    assert [r["lowered_as"] for r in on["lut_fusion"]["regions"]] == ["tosa::TABLE"] * 2
    # Two chains (sigmoid*2+0.5, tanh-0.25): each loses its mul/add/sub and their Q/DQ pairs.
    assert _delegated(off) - _delegated(on) >= 2 * 2
    assert on["delegated_ops"].get("aot::table") == 2 and "aten::mul" not in on["delegated_ops"]
    assert on["vela"]["npu_only_cycles_estimate"] < off["vela"]["npu_only_cycles_estimate"]
    assert on["numerics"]["snr_db"] >= off["numerics"]["snr_db"]
    assert on["numerics"]["max_abs"] <= off["numerics"]["max_abs"] + 1e-6


def test_lut_activations_u55_runs_on_npu_model(zoo_u55: Any) -> None:
    from emlkit.npu.program import run_bundled

    res = run_bundled(zoo_u55[0].bpte.read_bytes())
    assert res["status"] == "pass", res
    assert all(o["max_steps"] == 0 for o in res["outputs"])


def snr_on_fresh_inputs(module: nn.Module, example: tuple[torch.Tensor, ...], target: Any, fusion: bool,
                        n: int = 4) -> float:
    """SNR vs the float model of the lowered program (delegates on tosa_reference_model) over n unseen inputs.

    One figure over all n outputs: a single input's SNR moves by a few hundredths of a dB either way
    with where its values fall between codes, which is noise, not accuracy.
    """
    from emlkit import numerics, reference

    with torch.no_grad():
        low = ethos_u.lower(module.eval(), example, [example], target, make_options(lut_fusion=fusion, allow_float=True))
    names = reference.delegate_names(low.edge.exported_program().graph_module)
    graphs = {name: p.tosa for name, p in zip(names, low.extra["vela_partitions"])}
    refs, gots = [], []
    for i in range(n):
        torch.manual_seed(100 + i)
        x = tuple(torch.randn_like(t) for t in example)
        with torch.no_grad():
            refs.append(numerics.flatten_outputs(module(*x))[0].flatten())
            gots.append(reference.run_lowered(low.edge, x, graphs)[0].flatten())
    return numerics.compare([torch.cat(refs)], [torch.cat(gots)])[0]["snr_db"]


class ConvChain(nn.Module):
    def __init__(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.fn = fn

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fn(self.conv(x))


def test_chain_not_further_from_float_u55() -> None:
    m = ConvChain(lambda t: torch.clamp(torch.tanh(t) - 0.25, -0.5, 0.5))
    torch.manual_seed(0)
    example = (torch.randn(1, 3, 16, 16),)
    on = snr_on_fresh_inputs(m, example, U55, True)
    off = snr_on_fresh_inputs(m, example, U55, False)
    assert on >= off, (on, off)


@pytest.mark.slow
def test_lut_activations_a16w8_int16_chains_fused(compiled: Any) -> None:
    from emlkit import models

    on = compiled("lut_activations", "ethos-u55-128-a16w8", True).report
    off = compiled("lut_activations", "ethos-u55-128-a16w8", False).report
    regions = on["lut_fusion"]["regions"]
    assert [r["dtype"] for r in regions] == ["int16", "int16"]
    assert [r["table_entries"] for r in regions] == [INT16_ENTRIES] * 2
    assert _delegated(off) - _delegated(on) >= 2 * 2
    assert on["vela"]["npu_only_cycles_estimate"] < off["vela"]["npu_only_cycles_estimate"]
    zm = models.build("lut_activations")
    f = snr_on_fresh_inputs(zm.module, zm.inputs, U55_A16, True)
    u = snr_on_fresh_inputs(zm.module, zm.inputs, U55_A16, False)
    assert f >= u, (f, u)


@pytest.mark.slow
@pytest.mark.parametrize("fusion", [True, False])
def test_lut_activations_a16w8_runs_on_npu_model(compiled: Any, fusion: bool) -> None:
    """int16 tables (fused TABLE+RESCALE and the backend's own) execute bit-exactly on the NPU model."""
    from emlkit.npu.program import run_bundled

    res = run_bundled(compiled("lut_activations", "ethos-u55-128-a16w8", fusion).bpte.read_bytes())
    assert res["status"] == "pass", res["outputs"]
