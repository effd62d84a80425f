"""Program verifier (emlkit/verify.py): broken programs are errors, float islands listed with source lines."""

from __future__ import annotations

import pytest
import torch

from emlkit import models, verify
from emlkit.compile import make_options
from emlkit.errors import AotError
from emlkit.lower import cortex_m
from emlkit.targets import get_target

M55 = get_target("cortex-m55")


def _lower(name: str, fusion: bool, allow_float: bool) -> object:
    zm = models.build(name)
    with torch.no_grad():
        return cortex_m.lower(zm.module, zm.inputs, [zm.inputs], M55, make_options(fusion, False, allow_float))


def test_aten_conv_on_int8_is_rejected(monkeypatch: pytest.MonkeyPatch) -> None:
    # Reproduce the reported failure: activation fusion gives up (as it does with "qmin is out of range"),
    # which leaves aten.convolution / aten.hardsigmoid running on raw int8 data.
    from executorch.backends.cortex_m.passes.activation_fusion_pass import ActivationFusionPass

    # ActivationAlone quantizes every hardsigmoid on its own, so nothing is fused any more: without
    # it the conv + hardsigmoid pattern is fused and the broken fold leaves the conv reading int8.
    from emlkit.passes.activation_alone import ActivationAlone

    monkeypatch.setattr(ActivationFusionPass, "_get_validated_qparams", lambda self, node, inp: None)
    opts = make_options(False, False, True)   # --allow-float never excuses this
    opts.quantizer_hooks = [h for h in opts.quantizer_hooks if not isinstance(h, ActivationAlone)]
    zm = models.build("conv_hardsigmoid")
    with pytest.raises(AotError, match=r"is broken: node aten_\w+ at .*(conv_hardsigmoid|_blocks).py:\d+.*reads integer tensor"):
        with torch.no_grad():
            cortex_m.lower(zm.module, zm.inputs, [zm.inputs], M55, opts)


def test_float_islands_error_names_ops_and_lines() -> None:
    with pytest.raises(AotError, match=r"3 float op\(s\).*aten::mul at .*lut_activations.py:10 \(a = torch.sigmoid.*--allow-float"):
        _lower("lut_activations", fusion=False, allow_float=False)


def test_allow_float_reports_islands() -> None:
    low = _lower("lut_activations", fusion=False, allow_float=True)
    rep = low.extra["verify"]
    assert not rep["ok"] and len(rep["float_islands"]) == 3 and rep["warnings"]
    assert all("lut_activations.py" in f["source"] for f in rep["float_islands"])
    assert "float islands 3" in rep["summary"]


def test_clean_program_passes() -> None:
    low = _lower("lut_activations", fusion=True, allow_float=False)
    rep = low.extra["verify"]
    assert rep["ok"] and rep["quantized_op_coverage"] == 1.0 and rep["partitions"] == 0


def test_check_supported_still_reads_firmware_registry() -> None:
    assert ("aten::view_copy", "out") in verify.firmware_ops()


def test_emlkit_ops_are_known_and_integer_only() -> None:
    # The firmware implements our own ops (firmware/ops/emlkit_ops.def) ...
    known = verify.firmware_ops()
    assert {("emlkit::softmax", "out"), ("emlkit::quantized_avg_pool2d", "out")} <= known
    # ... a program using them is clean ...
    low = _lower("softmax", fusion=True, allow_float=False)
    gm = low.edge.exported_program().graph_module
    assert any(verify.edge_op_name(n) == "emlkit::softmax" for n in gm.graph.nodes)
    assert low.extra["verify"]["ok"]
    # ... and one where an emlkit op reads float data is broken.
    import emlkit.emlkit_ops as eo

    g = torch.fx.Graph()
    x = g.placeholder("x")
    x.meta["val"] = torch.zeros(2, 16)
    t = g.placeholder("table")
    t.meta["val"] = eo.softmax_exp_table(0.1)
    y = g.call_function(torch.ops.emlkit.softmax.default, (x, t, 1, -128, 1 << 30, 40))
    g.output(y)
    check = verify.check_program(torch.fx.GraphModule(torch.nn.Module(), g))
    assert [f.reason for f in check.broken] == ["integer kernel emlkit::softmax reads float tensor(s) x"]


def _one_op(target: object, inputs: list[torch.Tensor], *scalars: object) -> verify.ProgramCheck:
    """check_program of a graph calling TARGET on placeholders with the examples INPUTS, then SCALARS."""
    g = torch.fx.Graph()
    args = []
    for i, example in enumerate(inputs):
        a = g.placeholder(f"x{i}")
        a.meta["val"] = example
        args.append(a)
    g.output(g.call_function(target, (*args, *scalars)))
    return verify.check_program(torch.fx.GraphModule(torch.nn.Module(), g))


def test_logic_on_bools_and_integer_comparisons_are_exact() -> None:
    """A logical_or of bools (a constant attention mask joined with one from the inputs) and a comparison of
    integers that are not codes with an integer (`tokens == PAD`) are exact: no float island. The same ops on
    floats are islands, and bitwise logic on int8 codes is a broken program."""
    aten = torch.ops.aten
    b, i64, f, codes = torch.zeros(2, 6, dtype=torch.bool), torch.zeros(2, 6, dtype=torch.int64), torch.zeros(2, 6), \
        torch.zeros(2, 6, dtype=torch.int8)
    for check in (_one_op(aten.logical_or.default, [b, b]), _one_op(aten.bitwise_not.default, [b]),
                  _one_op(aten.eq.Scalar, [i64], 0), _one_op(aten.ne.Scalar, [i64.int()], 3)):
        assert not check.float_islands and not check.broken and check.float_ops == 0
    assert len(_one_op(aten.logical_or.default, [f, b]).float_islands) == 1
    assert len(_one_op(aten.eq.Scalar, [f], 0.5).float_islands) == 1
    assert len(_one_op(aten.eq.Scalar, [i64], 0.5).float_islands) == 1     # a fraction: not an integer comparison
    assert "reads integer tensor(s) x0" in _one_op(aten.bitwise_and.Tensor, [codes, codes]).broken[0].reason
