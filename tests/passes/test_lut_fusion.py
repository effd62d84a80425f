"""LUT fusion (emlkit/passes/lut_fusion.py): tables exact over the code domain, boundaries, fewer ops."""

from __future__ import annotations

import math
from typing import Any, Callable

import pytest
import torch
import torch.nn as nn
from hypothesis import given, settings, strategies as st

from emlkit import models, numerics, reference
from emlkit.compile import make_options
from emlkit.errors import AotError
from emlkit.lower import cortex_m
from emlkit.passes.lut_backends import CortexMLut
from emlkit.passes.lut_fusion import LutFusion, find_regions
from emlkit.targets import get_target
from pass_graphs import installed, lowered

aten = torch.ops.aten
qd = torch.ops.quantized_decomposed
M55 = get_target("cortex-m55")


# --------------------------------------------------------------- helpers

def _round_half_away(v: float) -> int:
    return int(math.copysign(math.floor(abs(v) + 0.5), v)) if v != 0 else 0


def expected_table(fn: Callable[[float], float], s_in: float, zp_in: int, s_out: float, zp_out: int,
                   qmin: int = -128, qmax: int = 127) -> list[int]:
    """Independent reference: Python floats, one code at a time: quantize(fn(dequantize(code)))."""
    out = []
    for code in range(-128, 128):
        y = fn((code - zp_in) * s_in)
        out.append(max(qmin, min(qmax, _round_half_away(y / s_out + zp_out))))
    return out


def lower(module: nn.Module, inputs: tuple[torch.Tensor, ...], fusion: bool = True, explicit: bool = False) -> Any:
    opts = make_options(lut_fusion=fusion, explicit_layout=explicit, allow_float=True)
    with torch.no_grad():
        return cortex_m.lower(module.eval(), inputs, [inputs], M55, opts)


def luts(low: Any) -> list[torch.Tensor]:
    ep = low.edge.exported_program()
    state = {**ep.state_dict, **ep.constants}
    by_node = {s.arg.name: s.target for s in ep.graph_signature.input_specs}
    out = []
    for n in ep.graph_module.graph.nodes:
        if n.op == "call_function" and "quantized_activation" in str(n.target):
            out.append(state[by_node[n.args[1].name]].flatten())
    return out


def op_count(low: Any) -> int:
    gm = low.edge.exported_program().graph_module
    return sum(1 for n in gm.graph.nodes if n.op == "call_function" and "alloc" not in str(n.target))


def float_ops(low: Any) -> list[str]:
    return [f["op"] for f in low.extra["verify"]["float_islands"]]


class Chain(nn.Module):
    """conv -> fn: the conv gives the chain a quantized input, as real networks do."""

    def __init__(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = nn.Conv2d(3, 4, 1)
        self.fn = fn

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fn(self.conv(x))


# Seeded: drawn at import from the global generator, X changed with the set of test modules imported before
# (the calibration and so the chains' qparams with it).
X = (torch.randn(1, 3, 16, 16, generator=torch.Generator().manual_seed(0)),)


def region_qparams(low: Any, i: int = 0) -> tuple[float, int, float, int]:
    r = low.extra["lut_fusion"]["regions"][i]
    return r["in_qparams"][0], r["in_qparams"][1], r["out_qparams"][0], r["out_qparams"][1]


# --------------------------------------------------------------- zoo: lut_activations

@pytest.fixture(scope="module")
def lut_zoo() -> tuple[Any, Any, Any]:
    zm = models.build("lut_activations")
    return zm, lower(zm.module, zm.inputs, True), lower(zm.module, zm.inputs, False)


def test_lut_activations_tables_exact(lut_zoo: Any) -> None:
    _, fused, _ = lut_zoo
    rep = fused.extra["lut_fusion"]
    assert rep["regions_fused"] == 2
    chains = [r["chain"] for r in rep["regions"]]
    assert chains == [["sigmoid.default", "mul.Tensor(2)", "add.Tensor(0.5)"], ["tanh.default", "sub.Tensor(0.25)"]]
    fns = [lambda v: 2.0 / (1.0 + math.exp(-v)) + 0.5, lambda v: math.tanh(v) - 0.25]
    for i, (table, fn) in enumerate(zip(luts(fused), fns)):
        assert table.tolist() == expected_table(fn, *region_qparams(fused, i))
    assert all("lut_activations.py" in r["source"] for r in rep["regions"])


def test_lut_activations_fewer_ops_no_islands_and_not_less_accurate(lut_zoo: Any) -> None:
    zm, fused, unfused = lut_zoo
    # sigmoid*2+0.5 and tanh-0.25: each loses its float ops and their Q/DQ pairs.
    assert op_count(unfused) - op_count(fused) >= 2 * 2
    assert float_ops(fused) == [] and sorted(float_ops(unfused)) == ["aten::add", "aten::mul", "aten::sub"]
    ref = numerics.flatten_outputs(zm.module(*zm.inputs))
    f = numerics.compare(ref, reference.run_lowered(fused.edge, fused.inputs))[0]
    u = numerics.compare(ref, reference.run_lowered(unfused.edge, unfused.inputs))[0]
    assert f["snr_db"] >= u["snr_db"]


# --------------------------------------------------------------- chains on a dense input

CHAINS: dict[str, tuple[Callable[[torch.Tensor], torch.Tensor], Callable[[float], float], int]] = {
    # name: (torch chain, python reference, ops in chain)
    "sigmoid_mul_add": (lambda t: torch.sigmoid(t) * 2.0 + 0.5, lambda v: 2.0 / (1 + math.exp(-v)) + 0.5, 3),
    "rsub_scalar_left": (lambda t: 2.0 - torch.tanh(t), lambda v: 2.0 - math.tanh(v), 2),
    "reciprocal_scalar_left": (lambda t: 1.0 / (torch.relu(t) + 1.0), lambda v: 1.0 / (max(v, 0.0) + 1.0), 3),
    "div_by_constant": (lambda t: torch.sigmoid(t) / 4.0, lambda v: 0.25 / (1 + math.exp(-v)), 2),
    "clamp_after_scale": (lambda t: torch.clamp(t * 3.0 - 0.5, -1.0, 2.0), lambda v: min(max(v * 3.0 - 0.5, -1.0), 2.0), 3),
    # Rounding ops are pointwise too: tables, not float islands (torch.round and Python's round: ties to even).
    "floor_after_scale": (lambda t: torch.floor(t * 2.0), lambda v: float(math.floor(v * 2.0)), 2),
    "ceil": (torch.ceil, lambda v: float(math.ceil(v)), 1),
    "round_after_scale": (lambda t: torch.round(t * 3.0), lambda v: float(round(v * 3.0)), 2),
    "trunc_after_scale": (lambda t: torch.trunc(t * 2.0), lambda v: float(math.trunc(v * 2.0)), 2),
    "threshold": (lambda t: torch.nn.functional.threshold(t, 0.5, -1.0), lambda v: v if v > 0.5 else -1.0, 1),
    "logsigmoid": (torch.nn.functional.logsigmoid,
                   lambda v: -math.log1p(math.exp(-v)) if v > 0 else v - math.log1p(math.exp(v)), 1),
    "prelu_one_slope": (nn.PReLU(init=0.25), lambda v: v if v >= 0 else 0.25 * v, 1),  # PReLU's own slope
    "hardshrink": (lambda t: torch.nn.functional.hardshrink(t, 0.5), lambda v: v if abs(v) > 0.5 else 0.0, 1),
}


@pytest.fixture(scope="module", params=list(CHAINS))
def chain_case(request: Any) -> tuple[str, Any, Any]:
    fn = CHAINS[request.param][0]
    m = Chain(fn)
    try:
        unfused = lower(m, X, False)
    except AotError as err:
        # ExecuTorch's own lowering of some chains is broken (a float kernel on int8 data): the verifier says so.
        assert "is broken" in str(err)
        unfused = err
    return request.param, lower(m, X, True), unfused


def test_chain_table_exact_and_fewer_ops(chain_case: Any) -> None:
    name, fused, unfused = chain_case
    _, ref_fn, n_ops = CHAINS[name]
    rep = fused.extra["lut_fusion"]
    assert rep["regions_fused"] == 1, rep
    assert len(rep["regions"][0]["chain"]) == n_ops
    assert luts(fused)[0].tolist() == expected_table(ref_fn, *region_qparams(fused))
    assert float_ops(fused) == []
    if not isinstance(unfused, AotError):
        if n_ops == 1 and not float_ops(unfused):
            # one op that has an int8 kernel of its own (PReLU: emlkit::prelu): the table replaces it one for one
            assert op_count(fused) == op_count(unfused)
        else:
            assert op_count(fused) < op_count(unfused)


def test_chain_not_further_from_float(chain_case: Any) -> None:
    name, fused, unfused = chain_case
    if isinstance(unfused, AotError):
        pytest.skip(f"unfused lowering of {name} is rejected as broken, nothing to compare with")
    # Seeded: per element, the unfused lowering's double rounding can land nearer the float model by
    # chance, so an unseeded input made this flaky; the seed keeps it a fixed, failable check.
    x = torch.randn(1, 3, 16, 16, generator=torch.Generator().manual_seed(1234))
    m = Chain(CHAINS[name][0])
    ref = [m(x.to(memory_format=torch.channels_last))]
    xin = (x.to(memory_format=torch.channels_last),)
    f = numerics.compare(ref, reference.run_lowered(fused.edge, xin))[0]
    u = numerics.compare(ref, reference.run_lowered(unfused.edge, xin))[0]
    assert f["snr_db"] >= u["snr_db"] - 0.05, (f, u)
    # The table is exact per input code, but on one element the unfused chain's extra roundings can
    # land nearer the float value by chance: allow that, up to half an output step, and no more.
    s_out = region_qparams(fused)[2]
    assert f["max_abs"] <= u["max_abs"] + 0.5 * s_out + 1e-6, (f, u, s_out)


def test_single_op_chain_matches_backend_table() -> None:
    from executorch.backends.cortex_m.passes.passes_utils import build_activation_lut
    from executorch.exir.dialects._ops import ops as exir_ops

    for fn, op in ((torch.sigmoid, exir_ops.edge.aten.sigmoid.default), (torch.tanh, exir_ops.edge.aten.tanh.default)):
        fused = lower(Chain(fn), X, True)
        unfused = lower(Chain(fn), X, False)
        assert fused.extra["lut_fusion"]["regions_fused"] == 1
        s_in, zp_in, s_out, zp_out = region_qparams(fused)
        ours = luts(fused)[0]
        assert torch.equal(ours, build_activation_lut(op, s_in, zp_in, s_out, zp_out))
        assert torch.equal(ours, luts(unfused)[0])


def test_explicit_layout_flow_fuses_the_same_table() -> None:
    m = Chain(CHAINS["sigmoid_mul_add"][0])
    legacy = lower(m, X, True)
    explicit = lower(m, X, True, explicit=True)
    assert explicit.extra["lut_fusion"]["regions_fused"] == 1
    assert luts(explicit)[0].tolist() == expected_table(CHAINS["sigmoid_mul_add"][1], *region_qparams(explicit))
    assert float_ops(explicit) == [] and float_ops(legacy) == []


# --------------------------------------------------------------- boundaries

class Branch(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = torch.sigmoid(self.conv(x))
        return (t * 2.0) + (1.0 - t)          # t has two users: the region must stop after sigmoid


class MultiInputMiddle(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 1)
        self.conv2 = nn.Conv2d(3, 4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = torch.tanh(self.conv(x)) + self.conv2(x)      # add of two tensors stops the region
        return torch.sigmoid(s) * 3.0 - 1.0               # ... the suffix is still fused


def test_branch_stops_region() -> None:
    low = lower(Branch(), X)
    chains = [r["chain"] for r in low.extra["lut_fusion"]["regions"]]
    assert ["sigmoid.default"] in chains
    assert not any(len(c) > 1 and c[0] == "sigmoid.default" for c in chains)
    assert float_ops(low) == []


def test_multi_input_op_then_fused_suffix() -> None:
    low = lower(MultiInputMiddle(), X)
    chains = [r["chain"] for r in low.extra["lut_fusion"]["regions"]]
    assert ["sigmoid.default", "mul.Tensor(3)", "sub.Tensor(1)"] in chains
    assert not any("add.Tensor" == c.split("(")[0] for ch in chains for c in ch if "(" not in c)


def _synthetic(ops: list[tuple[Any, Any]], s_in: float = 0.05, zp_in: int = 3, s_out: float = 0.02, zp_out: int = -5,
               requant_between: bool = False, extra_user: bool = False) -> torch.fx.GraphModule:
    """x_int8 -> dq -> op1 -> [q -> dq] -> op2 ... -> q -> output, the shape of a converted pt2e graph."""
    root = nn.Module()
    g = torch.fx.Graph()
    x = g.placeholder("x")
    cur = g.call_function(qd.dequantize_per_tensor.default, (x, s_in, zp_in, -128, 127, torch.int8))
    outs = []
    for i, (target, const) in enumerate(ops):
        if const is None:
            cur = g.call_function(target, (cur,))
        else:
            side, value = const
            name = f"c{i}"
            root.register_buffer(name, torch.tensor(float(value)))
            c = g.get_attr(name)
            cur = g.call_function(target, (c, cur) if side else (cur, c))
        if requant_between and i < len(ops) - 1:
            q = g.call_function(qd.quantize_per_tensor.default, (cur, 0.03, 0, -128, 127, torch.int8))
            cur = g.call_function(qd.dequantize_per_tensor.default, (q, 0.03, 0, -128, 127, torch.int8))
        if extra_user and i == 0:
            outs.append(cur)
    q = g.call_function(qd.quantize_per_tensor.default, (cur, s_out, zp_out, -128, 127, torch.int8))
    g.output(tuple([q] + outs) if outs else q)
    return torch.fx.GraphModule(root, g)


def _fuse(gm: torch.fx.GraphModule) -> LutFusion:
    p = LutFusion(backend=CortexMLut())
    p(gm)
    return p


def test_standalone_requantize_and_pure_qdq_untouched() -> None:
    gm = _synthetic([])                                   # dq -> q: a requantization
    p = _fuse(gm)
    assert p.last.regions == []
    assert [n.target for n in gm.graph.nodes if n.op == "call_function"] == [
        qd.dequantize_per_tensor.default, qd.quantize_per_tensor.default]


def test_graph_output_inside_chain_stops_region() -> None:
    gm = _synthetic([(aten.sigmoid.default, None), (aten.mul.Tensor, (0, 2.0))], extra_user=True)
    p = _fuse(gm)
    # sigmoid's value is a graph output: nothing before it may be folded away.
    assert p.last.regions == []
    assert p.last.skipped and "outside the chain" in p.last.skipped[0]["reason"]


def test_mutation_is_not_fused() -> None:
    gm = _synthetic([(aten.sigmoid.default, None)])
    node = next(n for n in gm.graph.nodes if n.target is aten.sigmoid.default)
    node.target = aten.sigmoid_.default                  # in-place variant: mutates its input
    gm.recompile()
    assert find_regions(gm) == []


def test_int16_region_left_alone_on_cortex_m() -> None:
    gm = _synthetic([(aten.sigmoid.default, None)])
    for n in gm.graph.nodes:
        if n.op == "call_function":
            n.args = (*n.args[:3], -32768, 32767, torch.int16)
    p = _fuse(gm)
    assert p.last.regions == [] and "int16" in p.last.skipped[0]["reason"]


def test_internal_requantization_is_dropped() -> None:
    gm = _synthetic([(aten.tanh.default, None), (aten.mul.Tensor, (0, 3.0))], requant_between=True)
    p = _fuse(gm)
    assert len(p.last.regions) == 1
    codes = torch.arange(-128, 128, dtype=torch.int8)
    assert gm(codes).tolist() == expected_table(lambda v: 3.0 * math.tanh(v), 0.05, 3, 0.02, -5)


# --------------------------------------------------------------- property-based: random chains

UNARY = [
    # -700: past it math.exp(-v) overflows where float32 sigmoid is 0 (e.g. after exp, then negated)
    (aten.sigmoid.default, lambda v: 1 / (1 + math.exp(-v)) if v > -700 else 0.0), (aten.tanh.default, math.tanh),
    (aten.relu.default, lambda v: max(v, 0.0)), (aten.neg.default, lambda v: -v), (aten.abs.default, abs),
    (aten.hardsigmoid.default, lambda v: min(max(v / 6 + 0.5, 0.0), 1.0)),
    (aten.hardswish.default, lambda v: v * min(max(v + 3, 0.0), 6.0) / 6),
    (aten.silu.default, lambda v: v / (1 + math.exp(-v)) if v > -700 else 0.0), (aten.erf.default, math.erf),
    (aten.exp.default, lambda v: math.exp(min(v, 80.0))),
]
BINARY = [
    (aten.add.Tensor, lambda v, c, left: v + c), (aten.sub.Tensor, lambda v, c, left: c - v if left else v - c),
    (aten.mul.Tensor, lambda v, c, left: v * c),
]


@st.composite
def chains(draw: Any) -> tuple[list[tuple[Any, Any]], list[Callable[[float], float]]]:
    ops, fns = [], []
    for _ in range(draw(st.integers(1, 5))):
        if draw(st.booleans()):
            target, f = draw(st.sampled_from(UNARY))
            ops.append((target, None))
            fns.append(f)
        else:
            target, f = draw(st.sampled_from(BINARY))
            c = draw(st.floats(-3, 3, allow_nan=False).filter(lambda v: abs(v) > 1e-3))
            left = draw(st.booleans())
            ops.append((target, (int(left), c)))
            fns.append(lambda v, f=f, c=c, left=left: f(v, c, left))
    return ops, fns


@settings(max_examples=40, deadline=None)
@given(chains(), st.floats(0.005, 0.2), st.integers(-20, 20), st.floats(0.005, 0.2), st.integers(-20, 20))
def test_random_chains_exact(chain: Any, s_in: float, zp_in: int, s_out: float, zp_out: int) -> None:
    ops, fns = chain
    gm = _synthetic(ops, s_in, zp_in, s_out, zp_out)
    p = _fuse(gm)
    assert len(p.last.regions) == 1
    assert sum(1 for n in gm.graph.nodes if n.op == "call_function") == 1

    def composed(v: float) -> float:
        for f in fns:
            v = f(v)
        return v

    codes = torch.arange(-128, 128, dtype=torch.int8)
    got = gm(codes).tolist()
    want = expected_table(composed, s_in, zp_in, s_out, zp_out)
    # torch's float64 kernels and Python's math may differ in the last ulp, which flips a rounding only
    # where the exact value is a tie (x.5): allow a one-step difference there and nowhere else.
    def at_tie(i: int) -> bool:
        q = composed((i - 128 - zp_in) * s_in) / s_out + zp_out
        return abs(abs(q - math.trunc(q)) - 0.5) < 1e-6

    diffs = [i for i, (a, b) in enumerate(zip(got, want)) if a != b]
    assert all(abs(got[i] - want[i]) == 1 and at_tie(i) for i in diffs), (diffs, ops)


def test_fused_region_leaves_only_the_table_op() -> None:
    """The chain's nodes are removed, not just bypassed: one table op between the input and the output."""
    gm = _synthetic([(aten.sigmoid.default, None), (aten.mul.Tensor, (0, 2.0))])
    p = _fuse(gm)
    assert len(p.last.regions) == 1
    assert [n.target for n in gm.graph.nodes if n.op == "call_function"] == [
        torch.ops.cortex_m.quantized_activation.default]


def test_round_half_away_on_ties() -> None:
    """ExecuTorch's build_activation_lut rounds half away from zero; torch.round would round ties to even."""
    from emlkit.passes.lut_backends import round_half_away
    x = torch.tensor([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49, -0.51], dtype=torch.float64)
    assert round_half_away(x).tolist() == [-3.0, -2.0, -1.0, 1.0, 2.0, 3.0, 0.0, -1.0]


def test_a_move_between_the_dequantize_and_a_pointwise_op_moves_onto_the_codes() -> None:
    """Random model dec7b:21: an index_select after a non-dividing adaptive pool, then a layout clone, neither
    annotated by the quantizer, stood between the pool's dequantize and a threshold, which stayed float (refused).
    They copy values only, so they move the int8 codes, and the threshold becomes a table on them."""
    class PoolSelectThreshold(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(0)
            self.c = nn.Conv2d(3, 4, 1)
            self.register_buffer("idx", torch.tensor([0, 1, 1]))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = torch.index_select(torch.nn.functional.adaptive_avg_pool2d(self.c(x), (2, 2)), 2, self.idx)
            return torch.nn.functional.threshold(y, 0.007, 0.317)

    model, x = PoolSelectThreshold().eval(), torch.randn(1, 3, 3, 2, generator=torch.Generator().manual_seed(4))
    low, opts = lowered(model, x, "cortex-m55")
    assert low.extra["verify"]["float_islands"] == [] and low.extra["verify"]["broken"] == []
    fused = installed(opts, LutFusion).report()["regions"]
    assert [r["chain"] for r in fused] == [["threshold.default(0.007, 0.317)"]]
    (a,) = reference.run_lowered(low.edge, (x,))
    f = model(x).detach()
    assert float(10 * torch.log10((f ** 2).sum() / ((a - f) ** 2).sum())) > 30.0
