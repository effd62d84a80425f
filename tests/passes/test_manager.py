"""emlkit/passes/manager.py: passes are discovered from emlkit/passes, declare their stage, ops and order,
and the manager orders and checks them."""

from __future__ import annotations

import itertools
import pkgutil

import pytest

import emlkit.passes
from emlkit.compile import make_options
from emlkit.errors import EXIT_INTERNAL
from emlkit.lower import LowerOptions
from emlkit.passes import configure
from emlkit.targets import get_target
from emlkit.passes.manager import (ALL, NOT_PASS_MODULES, STAGE_FIELD, STAGES, Pass, PassOrderError, discover, order,
                                pass_name, pipeline)

EXPECTED = {
    "pre_quant": ["Relu6ToHardtanh", "Conv1dAsConv2d", "RnnStateConstants", "ChannelShuffleAsPermute", "SumAsMean", "AdaptivePoolAsPool", "ConvTransposeOutputPadding", "MeanAsPool", "GluAsSigmoidMul", "LstmAsLayers",
                  "FoldLinearBatchNorm", "ClampTensorAsMinMax", "NormsAsLayerNorm", "ConstantLinearWeights", "BatchNormAsDepthwise", "SdpaAsMatmuls", "RollAsSlices", "SplitFusedProjection", "SplitAsSlices", "LinearToConv", "FcRowsAsPixels", "AvgPoolForNpu", "NpuPoolAsDepthwise",
                  "SplitBatchedMatmul", "BroadcastOperandsExpanded", "ChannelsLastEverywhere"],
    "quantizer_hook": ["Int8MatmulOnU55", "UpsampleSharedQparams", "ActivationAlone", "SymmetricWeightRange",
                       "OwnOutputQparams", "LstmOutputQparams", "Int8AroundOwnOps", "NpuSoftmaxRanges",
                       "NpuHardswishFloor", "NpuBagOutputs"],
    "pre_edge": ["LutFusion", "ScalarOpsAsTables", "EmlkitSoftmax", "EmlkitLogSoftmax", "EmbeddingAsInt8Gather", "CompareOnCodes", "ArgmaxOnCodes", "MedianOnCodes",
                 "MaskedFillOnCodes", "EmlkitAvgPool", "AdaptiveMaxOnCodes", "EmlkitBilinear", "EmlkitLstm", "EmlkitPrelu", "EmlkitAdaptiveAvgPool", "EmlkitFloorDivide", "EmlkitEmbeddingBag", "ExplicitNpuClamp", "NpuPoolZeroPoint",
                 "NpuA16w8ConvRescale"],
    "program": ["DepthwiseOneChannelAsConv", "FoldInputOffset", "WindowBias", "Int8LayerNorm", "PatchStages", "OperandsInOutOrder",
                "Int8Io"],
    "post": ["CancelTransposes", "ContiguousViewBase", "DropLayoutRoundTrips", "Int8Upsample", "KernelScratch"],
    "check": ["VerifyProgram"],
}


def _configured_in(opts: LowerOptions) -> list[object]:
    return [p for s in STAGES for p in getattr(opts, STAGE_FIELD[s])]


def _configured() -> list[object]:
    opts = LowerOptions()
    configure(opts)
    return _configured_in(opts)


def _only(names: list[str], *drop: str) -> list[str]:
    return [n for n in names if n not in drop]


CORTEX_M = {
    "pre_quant": _only(EXPECTED["pre_quant"], "FcRowsAsPixels", "AvgPoolForNpu", "NpuPoolAsDepthwise",
                       "SplitBatchedMatmul"),
    "quantizer_hook": _only(EXPECTED["quantizer_hook"], "Int8MatmulOnU55", "NpuSoftmaxRanges", "NpuHardswishFloor",
                            "NpuBagOutputs"),
    "pre_edge": ["LutFusion", "EmlkitSoftmax", "EmlkitLogSoftmax", "EmbeddingAsInt8Gather", "CompareOnCodes", "ArgmaxOnCodes", "MedianOnCodes",
                 "MaskedFillOnCodes", "EmlkitAvgPool", "AdaptiveMaxOnCodes", "EmlkitBilinear", "EmlkitLstm", "EmlkitPrelu", "EmlkitAdaptiveAvgPool", "EmlkitFloorDivide", "EmlkitEmbeddingBag"],
    "program": _only(EXPECTED["program"], "PatchStages", "Int8Io"),  # only with --patch-stages auto|N, --io int8
    "post": EXPECTED["post"],
    "check": EXPECTED["check"],
}
ETHOS_U = {
    "pre_quant": ["Relu6ToHardtanh", "Conv1dAsConv2d", "ChannelShuffleAsPermute", "LstmAsLayers", "SplitFusedProjection", "AvgPoolForNpu",
                  "NpuPoolAsDepthwise"],
    "quantizer_hook": ["LstmOutputQparams", "NpuSoftmaxRanges", "NpuHardswishFloor", "NpuBagOutputs"],
    # ArgmaxOnCodes to EmlkitBilinear, EmlkitEmbeddingBag: only on the nodes the partitioner leaves on the CPU
    # (manager.CPU_SIDE)
    "pre_edge": ["LutFusion", "ArgmaxOnCodes", "MedianOnCodes", "MaskedFillOnCodes", "AdaptiveMaxOnCodes", "EmlkitBilinear", "EmlkitLstm",
                 "EmlkitEmbeddingBag", "ExplicitNpuClamp", "NpuPoolZeroPoint"],
    "program": [],
    "post": _only(EXPECTED["post"], "DropLayoutRoundTrips"),
    "check": EXPECTED["check"],
}
PER_TARGET = {
    "cortex-m55": CORTEX_M,
    "cortex-m4": CORTEX_M,
    "ethos-u55-128": ETHOS_U,
    "ethos-u85-256": {**ETHOS_U, "pre_quant": _only(ETHOS_U["pre_quant"], "SplitFusedProjection") + ["SplitBatchedMatmul"]},
}
# Every configuration of an NPU family has the family's pipeline.
PER_TARGET.update({t: PER_TARGET["ethos-u85-256"] for t in ("ethos-u85-128", "ethos-u85-512", "ethos-u85-1024",
                                                             "ethos-u85-2048")})
PER_TARGET["ethos-u65-512"] = ETHOS_U
PER_TARGET["ethos-u85-256-a16w8"] = {
    **ETHOS_U, "pre_quant": ["Relu6ToHardtanh", "Conv1dAsConv2d", "ChannelShuffleAsPermute", "FcRowsAsPixels", "AvgPoolForNpu", "NpuPoolAsDepthwise",
                             "SplitBatchedMatmul"],
    "quantizer_hook": ["NpuHardswishFloor"],  # the int8 LSTM/GRU kernels take no int16 activations
    "pre_edge": _only(ETHOS_U["pre_edge"], "ArgmaxOnCodes", "MedianOnCodes", "MaskedFillOnCodes", "AdaptiveMaxOnCodes", "EmlkitBilinear",
                      "EmlkitLstm", "EmlkitEmbeddingBag")
    + ["NpuA16w8ConvRescale"]}


def test_every_pass_is_installed() -> None:
    assert pipeline(make_options()) == EXPECTED


@pytest.mark.parametrize("target", list(PER_TARGET))
def test_pipeline_per_target(target: str) -> None:
    assert pipeline(make_options(), get_target(target)) == PER_TARGET[target]


def test_pipeline_follows_the_options() -> None:
    m55 = get_target("cortex-m55")
    for io in ("int8", "int8-all"):
        assert pipeline(make_options(io=io), m55) == {**CORTEX_M, "program": _only(EXPECTED["program"], "PatchStages")}
    got = pipeline(make_options(lut_fusion=False, explicit_layout=True), m55)
    assert got == {**CORTEX_M, "pre_quant": _only(CORTEX_M["pre_quant"], "ChannelsLastEverywhere"),
                   "pre_edge": ["ScalarOpsAsTables", "EmlkitSoftmax", "EmlkitLogSoftmax", "EmbeddingAsInt8Gather", "CompareOnCodes", "ArgmaxOnCodes", "MedianOnCodes",
                                "MaskedFillOnCodes", "EmlkitAvgPool", "AdaptiveMaxOnCodes", "EmlkitBilinear", "EmlkitLstm", "EmlkitPrelu", "EmlkitAdaptiveAvgPool", "EmlkitFloorDivide", "EmlkitEmbeddingBag"]}
    assert pipeline(make_options(patch_bands=4), m55)["program"] == _only(EXPECTED["program"], "Int8Io")
    assert pipeline(make_options(patch_bands=4, io="int8"), m55)["program"] == EXPECTED["program"]
    # Portable-kernel cores keep the one-channel depthwise; a16w8 NPU targets get their own fixes.
    assert "DepthwiseOneChannelAsConv" not in pipeline(make_options(), get_target("cortex-m3"))["program"]
    a16 = pipeline(make_options(), get_target("ethos-u55-128-a16w8"))
    assert "Int8MatmulOnU55" in a16["quantizer_hook"] and "NpuA16w8ConvRescale" in a16["pre_edge"]
    assert "NpuSoftmaxRanges" not in a16["quantizer_hook"]


def test_binding_sets_the_managers_verdict() -> None:
    from emlkit.lower import bind_passes

    opts = make_options()
    bind_passes(opts, get_target("ethos-u85-256"))
    on = {pass_name(p) for p in _configured_in(opts) if p.applicable}  # type: ignore[attr-defined]
    assert on == set(itertools.chain(*PER_TARGET["ethos-u85-256"].values()))


def test_discovery_finds_every_pass_module() -> None:
    modules = {m.name for m in pkgutil.iter_modules(emlkit.passes.__path__)}
    pass_modules = {m for m in modules if not m.startswith("_")} - NOT_PASS_MODULES
    found = discover()
    assert {c.__module__.rsplit(".", 1)[-1] for c in found} == pass_modules
    assert sorted(pass_name(c()) for c in found) == sorted(itertools.chain(*EXPECTED.values()))
    assert NOT_PASS_MODULES <= modules, "NOT_PASS_MODULES names a module that is gone"


def test_declarations_are_valid() -> None:
    import torch

    import executorch.backends.cortex_m.ops.operators  # noqa: F401  (registers cortex_m::)

    classes = discover()
    assert len({c.order for c in classes}) == len(classes), "orders are unique"
    for c in classes:
        assert issubclass(c, Pass) and c.stage in STAGES and c.ops, c.__name__
        for op in c.ops:
            ns, _, name = op.partition(".")
            if ns in ("aten", "cortex_m", "quantized_decomposed") and " " not in op:
                packet, _, overload = name.partition(".")
                assert hasattr(getattr(torch.ops, ns), packet), f"{c.__name__}: unknown op {op}"
                assert not overload or hasattr(getattr(getattr(torch.ops, ns), packet), overload), op
    order([c() for c in classes])  # acyclic, consistent with the stage order


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
def test_order_does_not_depend_on_the_listing(shuffle: str) -> None:
    passes = _configured()
    given = {"as_given": passes, "reversed": passes[::-1], "rotated": passes[5:] + passes[:5]}[shuffle]
    got = order(given)
    _respects(got)
    assert [pass_name(p) for p in got] == list(itertools.chain(*EXPECTED.values()))


_orders = itertools.count(1)


def _pass(name: str, stage: str = "pre_quant", after: tuple[str, ...] = (), before: tuple[str, ...] = (),
          ops: tuple[str, ...] = ("aten.x",), rank: int | None = None) -> object:
    cls = type(name, (Pass,), {"stage": stage, "ops": ops, "runs_after": after, "runs_before": before,
                               "order": next(_orders) if rank is None else rank})
    return cls()


def test_manager_orders_topologically_and_by_order() -> None:
    a, b, c = _pass("A", after=("C",)), _pass("B"), _pass("C", before=("B",))
    assert [pass_name(p) for p in order([a, b, c])] == ["C", "A", "B"]
    last = _pass("Last", after=(ALL,))
    assert [pass_name(p) for p in order([last, a, b, c])][-1] == "Last"
    # Unconstrained passes run by `order`, not by the listing.
    x, y = _pass("X", rank=2), _pass("Y", rank=1)
    assert [pass_name(p) for p in order([x, y])] == ["Y", "X"]


@pytest.mark.parametrize("passes, message", [
    (lambda: [_pass("A", after=("B",)), _pass("B", after=("A",))], "cycle among A, B"),
    (lambda: [_pass("A", after=("Nope",))], "unknown pass 'Nope'"),
    (lambda: [_pass("A", stage="post", before=("B",)), _pass("B", stage="pre_quant")], "against the stage order"),
    (lambda: [_pass("A", stage="pre_edge", before=("B",)), _pass("B", stage="quantizer_hook")],
     "against the stage order"),   # adjacent stages too
    (lambda: [_pass("A", stage="sometime")], "unknown stage"),
    (lambda: [_pass("A", ops=())], "declares no ops"),
    (lambda: [type("Bare", (), {})()], "does not declare stage, ops, order"),
    (lambda: [_pass("A", after=(ALL,)), _pass("B", after=(ALL,))], "both run after every other pass"),
    (lambda: [_pass("A"), _pass("A")], "given twice"),
    (lambda: [_pass("A", before=(ALL,))], "only allowed in runs_after"),
    (lambda: [_pass("A", rank=7), _pass("B", rank=7)], "same order"),
])
def test_manager_refuses_bad_declarations(passes: object, message: str) -> None:
    with pytest.raises(PassOrderError, match=message) as err:
        order(passes())  # type: ignore[operator]
    assert err.value.exit_code == EXIT_INTERNAL
    assert str(err.value).startswith("internal error in the pass declarations: ")


def test_declare_refuses_a_class_that_is_not_a_pass() -> None:
    from emlkit.passes.manager import declare

    with pytest.raises(PassOrderError, match="does not derive"):
        declare("post", ("aten.x",), order=1)(type("Loose", (), {}))


@pytest.mark.parametrize("target", list(PER_TARGET))
def test_configured_for_a_target_holds_only_its_passes(target: str) -> None:
    """configure(opts, target=...) installs only the passes whose declaration covers the target, bound to it."""
    opts = LowerOptions()
    configure(opts, target=get_target(target))
    assert pipeline(opts) == PER_TARGET[target]
    assert all(p.applicable for p in _configured_in(opts))  # type: ignore[attr-defined]


def test_targets_are_compile_targets() -> None:
    """`targets` names compile targets (fnmatch patterns); the ops a pass rewrites are its `ops`."""
    from emlkit.passes.manager import declare

    with pytest.raises(PassOrderError, match="no compile targets"):
        declare("pre_quant", ("aten.x",), order=1, targets=("aten.conv2d",))(type("Opsy", (Pass,), {}))
    for c in discover():
        assert all(t.startswith(("cortex-m", "ethos-u")) for t in c.targets), c.__name__


class _Counting(Pass):
    def __init__(self) -> None:
        self.calls = 0

    def reset(self) -> None:
        self.reported = "reset"

    def report(self) -> dict[str, object]:
        return {"calls": self.calls}

    def work(self, subject: object, *rest: object) -> object:
        self.calls += 1
        return ("worked", subject)


def test_the_manager_not_the_pass_decides_whether_it_runs() -> None:
    """Pass.__call__ runs the body (`work`) only where the declaration applies; elsewhere the input comes back
    unchanged and `bind` is not called."""
    from emlkit.passes.manager import declare

    binds: list[str] = []
    cls = declare("pre_quant", ("aten.x",), order=1, flows=("ethos_u",))(
        type("OnlyNpu", (_Counting,), {"bind": lambda self, t, o: binds.append(t.name)}))
    p = cls()
    assert p("g") == ("worked", "g") and p.calls == 1  # unbound: runs (a pass built on its own)
    p.set_target(get_target("cortex-m55"), None)
    assert p("g") == "g" and p.calls == 1 and p.reported == "reset" and binds == []
    p.set_target(get_target("ethos-u55-128"), None)
    assert p("g") == ("worked", "g") and p.calls == 2 and binds == ["ethos-u55-128"]
    assert cls.report_key == "test_manager"  # by default the declaring module's name


def test_no_pass_decides_for_itself() -> None:
    """No pass body reads the manager's verdict or carries an on/off switch: only emlkit/passes/manager.py and
    the skeletons of emlkit/passes/graph.py do; and no pass imports another pass module's helpers."""
    import ast
    from pathlib import Path

    folder = Path(emlkit.passes.__file__).parent
    helpers = {"manager", "graph", "lut_fusion", "lut_ethos_u"}
    for path in sorted(folder.glob("*.py")):
        if path.stem in ("manager", "graph"):
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in ("applicable", "active", "enabled"):
                assert path.stem == "linear_to_conv" and node.attr == "applicable", f"{path.name}: {node.attr}"
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("emlkit.passes."):
                mod = node.module.rsplit(".", 1)[-1]
                assert not mod.startswith("_"), f"{path.name} imports private {node.module}"
                # the LUT family (fusion, and the unfused scalar tables) builds on its helper modules
                if path.stem not in helpers | {"lut_backends", "scalar_ops_as_tables"}:
                    assert mod in ("manager", "graph"), f"{path.name} imports {node.module}"
                assert not any(a.name.startswith("_") for a in node.names), f"{path.name}: {node.module}"


def test_cpu_side_passes_rewrite_only_what_the_npu_left() -> None:
    """A pass declared for the CPU side of the Ethos-U flows (manager.CPU_SIDE) rewrites any node on Cortex-M, and on
    an int8 Ethos-U target only the nodes whose sources the flow put in `cpu_nodes` (none before it has seen what the
    partitioner left on the CPU); a pass whose rewrite does not ask `may_rewrite` cannot declare it."""
    from types import SimpleNamespace

    from emlkit.passes.emlkit_bilinear import EmlkitBilinear
    from emlkit.passes.manager import CPU_SIDE, declare

    with pytest.raises(PassOrderError, match="may_rewrite"):
        declare("pre_edge", ("aten.x",), order=1, flows=("cortex_m", CPU_SIDE))(type("Blind", (_Counting,), {}))
    node = SimpleNamespace(meta={"from_node": [SimpleNamespace(name="y_1", from_node=[SimpleNamespace(
        name="interpolate", from_node=[])])]})
    p = EmlkitBilinear()
    assert p.may_rewrite(node)  # unbound: a pass built on its own takes any node
    p.set_target(get_target("cortex-m55"), None)
    assert p.applicable and p.may_rewrite(node)
    p.set_target(get_target("ethos-u55-128"), None)
    assert p.applicable and not p.may_rewrite(node)
    p.cpu_nodes = frozenset({"interpolate"})
    assert p.may_rewrite(node)
    p.cpu_nodes = frozenset({"y_1"})  # the name in the first export, not an intermediate graph's
    assert not p.may_rewrite(node)
    p.set_target(get_target("ethos-u85-256"), None)
    assert p.applicable and p.cpu_nodes == frozenset()  # each compile starts from none
    p.set_target(get_target("ethos-u55-128-a16w8"), None)
    assert not p.applicable
