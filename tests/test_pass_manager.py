"""aot/passes/manager.py: every pass declares its stage and ordering; the manager orders and checks them."""

from __future__ import annotations

from pathlib import Path

import pytest

from aot.compile import make_options
from aot.errors import EXIT_INTERNAL
from aot.lower import LowerOptions
from aot.passes import configure
from aot.passes.manager import ALL, STAGE_FIELD, STAGES, PassOrderError, order, pass_name

PASSES_DIR = Path(__file__).resolve().parent.parent / "aot" / "passes"
# Modules of aot/passes that hold helpers of a pass, not a pass.
HELPERS = {"__init__", "manager", "lut_backends", "lut_ethos_u", "_graph", "_quantizer_hooks", "_arm_hook"}


def _configured() -> list[object]:
    opts = LowerOptions()
    configure(opts)
    return [p for s in STAGES for p in getattr(opts, STAGE_FIELD[s])]


def test_configured_order() -> None:
    opts = make_options()
    got = {s: [pass_name(p) for p in getattr(opts, STAGE_FIELD[s])] for s in STAGES}
    assert got == {
        "pre_quant": ["Relu6ToHardtanh", "Conv1dAsConv2d", "FoldLinearBatchNorm", "SplitFusedProjection",
                      "SplitAsSlices", "LinearToConv", "FcRowsAsPixels", "AvgPoolForNpu", "NpuPoolAsDepthwise", "SplitBatchedMatmul",
                      "ChannelsLastEverywhere"],
        "quantizer_hook": ["Int8MatmulOnU55", "UpsampleSharedQparams", "ActivationAlone", "SymmetricWeightRange",
                           "OwnOutputQparams", "NpuSoftmaxRanges", "NpuHardswishFloor"],
        "pre_edge": ["LutFusion", "EmlkitSoftmax", "EmlkitAvgPool", "ExplicitNpuClamp", "NpuPoolZeroPoint",
                     "NpuA16w8ConvRescale"],
        "program": ["DepthwiseOneChannelAsConv", "FoldInputOffset", "WindowBias", "Int8LayerNorm"],
        "post": ["CancelTransposes", "ContiguousViewBase", "Int8Upsample", "KernelScratch"],
        "check": ["VerifyProgram"],
    }


def _respects(seq: list[object]) -> None:
    pos = {pass_name(p): i for i, p in enumerate(seq)}
    for p in seq:
        stage = type(p).stage  # type: ignore[attr-defined]
        for a in type(p).runs_after:  # type: ignore[attr-defined]
            if a == ALL:
                assert all(pos[pass_name(q)] < pos[pass_name(p)] for q in seq
                           if type(q).stage == stage and q is not p), pass_name(p)  # type: ignore[attr-defined]
            else:
                assert pos[a] < pos[pass_name(p)], f"{a} must run before {pass_name(p)}"
        for b in type(p).runs_before:  # type: ignore[attr-defined]
            assert pos[pass_name(p)] < pos[b], f"{pass_name(p)} must run before {b}"


@pytest.mark.parametrize("shuffle", ["as_given", "reversed", "rotated"])
def test_declarations_hold_whatever_the_listing_order(shuffle: str) -> None:
    passes = _configured()
    given = {"as_given": passes, "reversed": passes[::-1], "rotated": passes[5:] + passes[:5]}[shuffle]
    got = order(given)
    _respects(got)
    stages = [STAGES.index(type(p).stage) for p in got]  # type: ignore[attr-defined]
    assert stages == sorted(stages)
    # The declarations, not the listing, put these where they must be.
    names = [pass_name(p) for p in got]
    assert names.index("ChannelsLastEverywhere") == max(names.index(n) for n in names
                                                         if n in ("Relu6ToHardtanh", "Conv1dAsConv2d", "LinearToConv",
                                                                  "FcRowsAsPixels", "AvgPoolForNpu", "SplitBatchedMatmul",
                                                                  "NpuPoolAsDepthwise", "FoldLinearBatchNorm",
                                                                  "ChannelsLastEverywhere"))
    assert names.index("AvgPoolForNpu") < names.index("NpuPoolAsDepthwise")
    assert names.index("FoldLinearBatchNorm") < names.index("LinearToConv")
    assert names.index("SplitFusedProjection") < min(names.index("FcRowsAsPixels"), names.index("LinearToConv"))
    assert names.index("Int8MatmulOnU55") < names.index("UpsampleSharedQparams") < names.index("ActivationAlone")
    assert names.index("DepthwiseOneChannelAsConv") < names.index("FoldInputOffset") < names.index("WindowBias")
    assert names[-1] == "VerifyProgram" and names[-2] == "KernelScratch"


def test_every_pass_module_is_configured_and_declared() -> None:
    modules = {type(p).__module__.rsplit(".", 1)[-1] for p in _configured()}
    files = {f.stem for f in PASSES_DIR.glob("*.py")} - HELPERS
    assert files == modules, "a pass file is not in aot.passes.configure (or HELPERS is out of date)"
    for p in _configured():
        assert type(p).targets, pass_name(p)  # type: ignore[attr-defined]


def _pass(name: str, stage: str = "pre_quant", after: tuple[str, ...] = (), before: tuple[str, ...] = (),
          targets: tuple[str, ...] = ("aten.x",)) -> object:
    cls = type(name, (), {"stage": stage, "targets": targets, "runs_after": after, "runs_before": before})
    return cls()


def test_manager_orders_topologically() -> None:
    a, b, c = _pass("A", after=("C",)), _pass("B"), _pass("C", before=("B",))
    assert [pass_name(p) for p in order([a, b, c])] == ["C", "A", "B"]
    last = _pass("Last", after=(ALL,))
    assert [pass_name(p) for p in order([last, a, b, c])][-1] == "Last"


@pytest.mark.parametrize("passes, message", [
    (lambda: [_pass("A", after=("B",)), _pass("B", after=("A",))], "cycle among A, B"),
    (lambda: [_pass("A", after=("Nope",))], "unknown pass 'Nope'"),
    (lambda: [_pass("A", stage="post", before=("B",)), _pass("B", stage="pre_quant")], "against the stage order"),
    (lambda: [_pass("A", stage="pre_edge", before=("B",)), _pass("B", stage="quantizer_hook")],
     "against the stage order"),   # adjacent stages too
    (lambda: [_pass("A", stage="sometime")], "unknown stage"),
    (lambda: [_pass("A", targets=())], "declares no targets"),
    (lambda: [type("Bare", (), {})()], "does not declare stage, targets, runs_after, runs_before"),
    (lambda: [_pass("A", after=(ALL,)), _pass("B", after=(ALL,))], "both run after every other pass"),
    (lambda: [_pass("A"), _pass("A")], "given twice"),
    (lambda: [_pass("A", before=(ALL,))], "only allowed in runs_after"),
])
def test_manager_refuses_bad_declarations(passes: object, message: str) -> None:
    with pytest.raises(PassOrderError, match=message) as err:
        order(passes())  # type: ignore[operator]
    assert err.value.exit_code == EXIT_INTERNAL
    assert str(err.value).startswith("internal error in the pass declarations: ")
