"""Issue 7 models compile for cortex-m55 with no float islands and stay close to the float model; Linear
layers get per-channel weights on Cortex-M; pools the Ethos-U55 rejects are rewritten so models compile to
one NPU partition that the functional model runs bit-exactly."""

from __future__ import annotations

import logging
import textwrap
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import given, settings, strategies as st

from emlkit import models, numerics, reference
from emlkit.compile import compile_model, make_options
from emlkit.load import load_model
from emlkit.lower import cortex_m
from emlkit.lower.export import export_graph
from emlkit.passes.avgpool_for_npu import AvgPoolForNpu, small_factors
from emlkit.passes.linear_to_conv import LinearToConv
from emlkit.targets import get_target

log = logging.getLogger(__name__)
M55 = get_target("cortex-m55")
U55 = "ethos-u55-128"

# SNR floors (dB): int8 activations give ~6 dB/bit * 8 bits minus the loss of a few chained
# requantizations; every model here measured 35.8-56 dB, the floors leave ~6 dB of margin
# (attention: 35.8 measured, softmax and two int8 matmuls in a row).
CASES = {"conv_hardsigmoid": 45.0, "relu6_net": 35.0, "scalar_arith": 32.0, "fc_autoencoder": 30.0,
         "global_avgpool": 36.0, "attention": 30.0}


def _options(linear_mode: str = "auto"):
    opts = make_options(allow_float=False)
    for p in opts.pre_quant_passes:
        if isinstance(p, LinearToConv):
            p.mode = linear_mode
    return opts


def _lower_m55(name: str, linear_mode: str = "auto"):
    zm = models.build(name) if name in models.ZOO else load_model(name)
    opts = _options(linear_mode)
    with torch.no_grad():
        low = cortex_m.lower(zm.module, zm.inputs, [zm.inputs], M55, opts)
        out = reference.run_lowered(low.edge, low.inputs)
        ref = numerics.flatten_outputs(zm.module(*zm.inputs))
    return low, numerics.compare(ref, out)[0]["snr_db"]


def _edge_ops(low) -> list[str]:
    return [str(n.target) for n in low.edge.exported_program().graph_module.graph.nodes if n.op == "call_function"]


@pytest.mark.parametrize("name", list(CASES))
def test_cortex_m_int8_no_float_islands(name: str) -> None:
    low, snr = _lower_m55(name)
    # The channels-last conversion works on a copy: the zoo's module object is shared with later compiles.
    assert all(p.is_contiguous() for p in models.build(name).module.parameters())
    assert low.extra["verify"]["float_islands"] == []
    assert low.extra["verify"]["quantized_op_coverage"] == 1.0
    assert snr >= CASES[name], f"{name}: SNR {snr:.1f} dB below the floor {CASES[name]} dB"


def test_attention_matmuls_are_int8_batch_matmuls() -> None:
    # attn @ v used to die in ReplaceScalarWithTensorArgPass (a still-aten int8 linear retraces to int32).
    low, _ = _lower_m55("attention")
    ops = _edge_ops(low)
    assert sum("cortex_m.quantized_batch_matmul" in o for o in ops) == 2
    assert not any("aten.bmm" in o or "aten.linear" in o for o in ops)
    # k.transpose(-2, -1) and the matmul lowering's own transpose of its right operand cancel
    # (CancelTransposes); only v's transpose for attn @ v is left.
    assert sum("cortex_m.transpose" in o for o in ops) == 1
    assert low.extra["cancel_transposes"]["removed_pairs"] == 1


# Linear layers per channel: output SNR vs the float model, per-tensor -> per-channel. Measured on this
# toolkit: mlp 33.2 -> 36.5 dB ("all"; batch 1, so "auto" keeps the FC kernel), fc_autoencoder
# 36.5 -> 38.1 dB ("auto" = "all" there: 4 rows). The assertions ask for a gain of at least 1 dB on mlp
# (the MLP model the issue names) and no loss on fc_autoencoder with the default mode.
@pytest.mark.parametrize("name,mode,min_gain", [("mlp", "all", 1.0), ("fc_autoencoder", "auto", 0.0)])
def test_per_channel_linear_improves_snr(name: str, mode: str, min_gain: float, record_property) -> None:
    low_t, snr_t = _lower_m55(name, "off")
    low_c, snr_c = _lower_m55(name, mode)
    log.warning("%s SNR vs float: per-tensor linear %.2f dB, per-channel (1x1 conv, mode %s) %.2f dB",
                name, snr_t, mode, snr_c)
    record_property(f"{name}_snr_per_tensor_db", round(snr_t, 2))
    record_property(f"{name}_snr_per_channel_db", round(snr_c, 2))
    assert any("quantized_linear" in o for o in _edge_ops(low_t))
    ops_c = _edge_ops(low_c)
    assert not any("quantized_linear" in o for o in ops_c) and any("quantized_conv2d" in o for o in ops_c)
    # The ReLUs stay fused into the conv bounds (no separate activation op for them).
    assert not any("quantized_activation" in o or "aten.relu" in o for o in ops_c)
    assert snr_c >= snr_t + min_gain, f"{name}: per-channel {snr_c:.2f} dB vs per-tensor {snr_t:.2f} dB"


def test_auto_mode_keeps_cheap_batch1_fc_layers() -> None:
    low, _ = _lower_m55("mlp", "auto")
    ops = _edge_ops(low)
    assert sum("quantized_linear" in o for o in ops) == 3 and not any("quantized_conv2d" in o for o in ops)


LINEAR_LUT = textwrap.dedent('''
    """Batch-1 Linear followed by a fused pointwise chain (a LUT on Cortex-M)."""
    import torch
    import torch.nn as nn
    torch.manual_seed(0)
    class M(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(16, 16)
        def forward(self, x):
            return torch.sigmoid(self.fc(x)) * 2.0 + 0.5
    ModelUnderTest = M().eval()
    ModelInputs = (torch.randn(1, 16),)
''')


def test_linear_into_lut_lowers(tmp_path: Path) -> None:
    # Per-tensor, ExecuTorch's retrace gives quantized_activation an int32 input and the compile dies;
    # "auto" rewrites this layer even at batch 1.
    src = tmp_path / "linear_lut.py"
    src.write_text(LINEAR_LUT)
    low, snr = _lower_m55(str(src), "auto")
    ops = _edge_ops(low)
    assert any("quantized_conv2d" in o for o in ops) and any("quantized_activation" in o for o in ops)
    assert low.extra["verify"]["float_islands"] == [] and snr >= 45.0   # measured 53.4 dB


def test_per_channel_linear_runs_exactly_on_host(compiled, tmp_path: Path) -> None:
    from emlkit.run import execute

    for res in (compile_model("mlp", "cortex-m55", tmp_path, options=_options("all")),
                compiled("attention", "cortex-m55")):
        assert any("quantized_conv2d" in op for op in res.report["ops"]), res.report["ops"]
        o = execute(res, "host", "auto", 300, "mve", None)
        assert o.status == "PASS", (o.reason, o.result)
        assert all(d.max_steps == 0 for d in o.result.outputs)


# ------------------------------------------------------------------ graph rewrites keep the float model
@settings(max_examples=15, deadline=None)
@given(lead=st.lists(st.integers(1, 5), min_size=0, max_size=2), cin=st.integers(1, 12),
       cout=st.integers(1, 12), bias=st.booleans())
def test_linear_to_conv_keeps_float_function(lead: list[int], cin: int, cout: int, bias: bool) -> None:
    torch.manual_seed(0)
    mod = torch.nn.Sequential(torch.nn.Linear(cin, cout, bias=bias), torch.nn.ReLU()).eval()
    x = torch.randn(*lead, cin)
    gm = LinearToConv(mode="all")(export_graph(mod, (x,)))
    assert not any(n.target is torch.ops.aten.linear.default for n in gm.graph.nodes)
    torch.testing.assert_close(gm(x)[0] if isinstance(gm(x), (tuple, list)) else gm(x), mod(x), rtol=1e-5, atol=1e-5)


def test_small_factors() -> None:
    assert small_factors(8) == [2, 2, 2] and small_factors(6) == [3, 2] and small_factors(9) == [3, 3]
    assert small_factors(5) is None and small_factors(14) is None and small_factors(1) == []


@settings(max_examples=15, deadline=None)
@given(kh=st.sampled_from([1, 2, 4, 6, 8, 9]), kw=st.sampled_from([4, 6, 8, 12]),
       th=st.integers(1, 3), tw=st.integers(1, 2))
def test_avgpool_rewrite_keeps_float_function(kh: int, kw: int, th: int, tw: int) -> None:
    mod = torch.nn.AvgPool2d((kh, kw)).eval()
    x = torch.randn(1, 3, kh * th, kw * tw)
    p = AvgPoolForNpu()
    gm = p(export_graph(mod, (x,)))
    assert len(p.rewritten) == 1 and not p.skipped
    pools = [n for n in gm.graph.nodes if n.target is torch.ops.aten.avg_pool2d.default]
    assert all(max(n.args[2]) <= 3 for n in pools)
    out = gm(x)
    torch.testing.assert_close(out[0] if isinstance(out, (tuple, list)) else out, mod(x), rtol=1e-5, atol=1e-6)


def test_avgpool_rewrite_leaves_what_it_cannot_do() -> None:
    p = AvgPoolForNpu()
    gm = p(export_graph(torch.nn.AvgPool2d(5).eval(), (torch.randn(1, 2, 10, 10),)))
    assert not p.rewritten and "prime factor" in p.skipped[0]["reason"]
    assert any(n.target is torch.ops.aten.avg_pool2d.default for n in gm.graph.nodes)


class _Head(torch.nn.Module):
    """features -> pool -> flatten -> Linear: the classifier head NpuPoolAsDepthwise looks for."""

    def __init__(self, pool: Any, c: int = 6) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, c, 3, padding=1)
        self.pool = pool
        self.fc = torch.nn.Linear(c, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.pool(torch.relu(self.conv(x))), 1))


@pytest.mark.parametrize("pool", ["adaptive", "avg", "mean"])
def test_npu_pool_as_depthwise_keeps_float_function(pool: str) -> None:
    from emlkit.passes.npu_pool_as_depthwise import NpuPoolAsDepthwise

    h, w = 5, 7
    p = {"adaptive": torch.nn.AdaptiveAvgPool2d(1), "avg": torch.nn.AvgPool2d((h, w)),
         "mean": _Mean()}[pool]
    mod = _Head(p).eval()
    x = torch.randn(1, 3, h, w)
    rw = NpuPoolAsDepthwise()
    rw.set_target(get_target(U55), None)
    gm = rw(export_graph(mod, (x,)))
    assert len(rw.done) == 1, gm.graph
    convs = [n for n in gm.graph.nodes if n.target is torch.ops.aten.conv2d.default]
    assert len(convs) == 2 and convs[1].args[6] == 6         # depthwise: groups = channels
    assert not [n for n in gm.graph.nodes if n.target in (torch.ops.aten.avg_pool2d.default, torch.ops.aten.mean.dim,
                                                          torch.ops.aten.adaptive_avg_pool2d.default)]
    out = gm(x)
    torch.testing.assert_close(out[0] if isinstance(out, (tuple, list)) else out, mod(x), rtol=1e-5, atol=1e-6)


class _Mean(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.mean(dim=(2, 3), keepdim=True)


def _npu_pool_rewrite() -> Any:
    from emlkit.passes.npu_pool_as_depthwise import NpuPoolAsDepthwise

    rw = NpuPoolAsDepthwise()
    rw.set_target(get_target(U55), None)
    return rw


def test_npu_pool_as_depthwise_takes_squeeze_excite_pools() -> None:
    # A gate's pool (not before a classifier): TOSA's AVG_POOL2D rounds ties up, the quantized model to even.
    class SE(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * torch.sigmoid(torch.nn.functional.adaptive_avg_pool2d(x, 1))

    x = torch.randn(1, 3, 4, 4)
    rw = _npu_pool_rewrite()
    gm = rw(export_graph(SE().eval(), (x,)))
    assert len(rw.done) == 1
    torch.testing.assert_close(gm(x)[0] if isinstance(gm(x), (tuple, list)) else gm(x), SE()(x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case", ["not_whole_map", "window_too_tall", "cortex_m"])
def test_npu_pool_as_depthwise_leaves_the_rest(case: str) -> None:
    from emlkit.passes.npu_pool_as_depthwise import NpuPoolAsDepthwise

    x = torch.randn(1, 3, 70 if case == "window_too_tall" else 4, 4)
    mod: torch.nn.Module = _Head(torch.nn.AdaptiveAvgPool2d(1))
    if case == "not_whole_map":
        mod = torch.nn.Sequential(torch.nn.AvgPool2d(2), torch.nn.Flatten(), torch.nn.Linear(12, 2))
    rw = NpuPoolAsDepthwise()
    rw.set_target(get_target("cortex-m55" if case == "cortex_m" else U55), None)
    rw(export_graph(mod.eval(), (x,)))
    assert rw.done == []


# ------------------------------------------------------------------ Ethos-U55: one partition, exact on the NPU model
POOL_STRIDE4 = textwrap.dedent('''
    """AvgPool2d((4, 8)) with stride = window: above the U55's stride limit of 3."""
    import torch
    import torch.nn as nn
    torch.manual_seed(0)
    class M(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3, padding=1)
            self.pool = nn.AvgPool2d((4, 8))
            self.conv2 = nn.Conv2d(8, 4, 1)
        def forward(self, x):
            return self.conv2(self.pool(torch.relu(self.conv(x))))
    ModelUnderTest = M().eval()
    ModelInputs = (torch.randn(1, 3, 16, 16),)
''')

# SNR floors on the NPU (dB), ~6 dB under the measured figures: relu6_net 43.6, global_avgpool 46.2,
# pool_stride4 43.4, conv_hardsigmoid 57.3, scalar_arith 38.2, attention 38.5, fc_autoencoder 38.5.
U55_CASES = {"relu6_net": 37.0, "global_avgpool": 40.0, "pool_stride4": 37.0, "conv_hardsigmoid": 50.0,
             "scalar_arith": 32.0, "attention": 32.0, "fc_autoencoder": 32.0}


@pytest.mark.parametrize("name", list(U55_CASES))
def test_ethos_u55_one_partition_exact_on_npu_model(compiled, tmp_path: Path, name: str) -> None:
    from emlkit.run import execute

    if name in models.ZOO:
        res = compiled(name, U55)
    else:
        src = tmp_path / f"{name}.py"
        src.write_text(POOL_STRIDE4)
        res = compile_model(str(src), U55, tmp_path / "out", options=make_options())
    rep = res.report
    assert rep["partitions"] == 1, rep["ops"]
    assert set(rep["ops"]) <= {"delegate:EthosUBackend", "cortex_m::quantize_per_tensor",
                               "cortex_m::dequantize_per_tensor"}, rep["ops"]
    assert rep["verify"]["float_islands"] == []
    assert rep["numerics"]["snr_db"] >= U55_CASES[name]
    o = execute(res, "host", "auto", 300, "mve", None)
    assert o.status == "PASS", (o.reason, o.result)
    assert all(d.max_steps == 0 for d in o.result.outputs)
