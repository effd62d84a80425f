"""Helpers of the pass tests: a tiny model's exported graph, a pass bound to a target, the ops a graph calls."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from emlkit.compile import make_options
from emlkit.lower.export import export_graph
from emlkit.targets import get_target


def graph_of(module: torch.nn.Module, *inputs: torch.Tensor) -> torch.fx.GraphModule:
    """The graph the pre-quant passes get (torch.export, as the flows export)."""
    return export_graph(module.eval(), inputs)


def bound(p: Any, target: str, **options: Any) -> Any:
    """`p` bound to a compile target as the flow binds it (the manager's verdict, then its settings)."""
    p.set_target(get_target(target), make_options(**options))
    return p


def called(gm: torch.fx.GraphModule) -> list[Any]:
    return [n.target for n in gm.graph.nodes if n.op == "call_function"]


def lowered(module: torch.nn.Module, x: torch.Tensor | tuple[torch.Tensor, ...], target: str,
            drop: tuple[str, ...] = (), **options: Any) -> tuple[Any, Any]:
    """MODULE lowered for TARGET by its flow with our passes (but those named in DROP): (Lowered, options).
    X is the input, or a tuple of inputs (calibrated on themselves: integer inputs such as indices have no random
    stand-in). No firmware, no .pte: the flow's lowering only (seconds for a small model)."""
    from emlkit.lower import cortex_m, ethos_u
    from emlkit.passes.manager import STAGE_FIELD, pass_name

    opts = make_options(**options)
    for name in STAGE_FIELD.values():
        setattr(opts, name, [p for p in getattr(opts, name) if pass_name(p) not in drop])
    t = get_target(target)
    flow = cortex_m if t.flow == "cortex_m" else ethos_u
    torch.manual_seed(0)
    inputs = x if isinstance(x, tuple) else (x,)
    data = [inputs] if isinstance(x, tuple) else [(x,)] + [(torch.randn_like(x),) for _ in range(2)]
    with torch.no_grad():
        low = flow.lower(module.eval(), inputs, data, t, opts)
    return low, opts


def installed(opts: Any, cls: type) -> Any:
    """The instance of pass class CLS the options hold."""
    from emlkit.passes.manager import STAGE_FIELD

    return next(p for name in STAGE_FIELD.values() for p in getattr(opts, name) if isinstance(p, cls))


def program_ops(low: Any) -> list[str]:
    """The ops the lowered (edge) program calls, as strings (e.g. 'cortex_m.quantized_conv2d.default')."""
    gm = low.edge.exported_program().graph_module
    return [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]


def assert_lowered_within_one_step(model: torch.nn.Module, x: torch.Tensor, cls: type,
                                   lowered_op: Callable[[str], bool], float_op: Callable[[str], bool]) -> list[str]:
    """Pass CLS lowers MODEL's one op on cortex-m55 (an op of the program meets LOWERED_OP), leaving no float
    island, and the result is within one output step of the program without CLS (allowed float: an op meets
    FLOAT_OP). Returns the lowered program's ops."""
    from emlkit import reference

    low, opts = lowered(model, x, "cortex-m55")
    assert len(installed(opts, cls).report()["lowered"]) == 1
    ops = program_ops(low)
    assert any(lowered_op(o) for o in ops), ops
    assert low.extra["verify"]["float_islands"] == [] and low.extra["verify"]["broken"] == []
    ref, _ = lowered(model, x, "cortex-m55", drop=(cls.__name__,), allow_float=True)
    assert any(float_op(o) for o in program_ops(ref))
    (a,), (b,) = reference.run_lowered(low.edge, (x,)), reference.run_lowered(ref.edge, (x,))
    step = [float(n.args[1]) for n in low.quantized.graph.nodes if n.op == "call_function"
            and n.target is torch.ops.quantized_decomposed.dequantize_per_tensor.default][-1]
    assert a.shape == b.shape == model(x).shape
    assert (a - b).abs().max() <= step * (1 + 1e-5)
    return ops


def in_pipeline(cls: type, target: str, **options: Any) -> bool:
    """Whether the manager puts pass class CLS in TARGET's pipeline: the pipeline of options configured for any
    target, and those configured for TARGET alone (emlkit.passes.configure(..., target=...)) agree."""
    import itertools

    from emlkit.lower import LowerOptions
    from emlkit.passes import configure
    from emlkit.passes.manager import STAGE_FIELD, pipeline

    t = get_target(target)
    listed = cls.__name__ in itertools.chain(*pipeline(make_options(**options), t).values())
    only = LowerOptions(**{k: v for k, v in options.items() if k != "allow_float"})
    configure(only, target=t)
    held = any(type(p) is cls for name in STAGE_FIELD.values() for p in getattr(only, name))  # not a subclass
    assert listed == held, (cls.__name__, target)
    return listed


def assert_pipelines(cls: type, on: tuple[str, ...], off: tuple[str, ...] = (), **options: Any) -> None:
    """CLS is in the pipelines of the targets ON and not in those of OFF."""
    for t in on:
        assert in_pipeline(cls, t, **options), f"{cls.__name__} missing from {t}'s pipeline"
    for t in off:
        assert not in_pipeline(cls, t, **options), f"{cls.__name__} in {t}'s pipeline"


class QKScores(torch.nn.Module):
    """Attention scores q @ k^T of two Linear projections (a transpose pair on Cortex-M, a matmul everywhere)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.q, self.k = torch.nn.Linear(16, 16), torch.nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.q(x) @ self.k(x).transpose(-2, -1)


def assert_arm_part_off(cls: type, target: str) -> None:
    """A pass with a part inside ExecuTorch's Arm pipeline, bound to TARGET (one it does not apply to), keeps
    that part off during the lowering."""
    p = cls()
    p.set_target(get_target(target), None)
    assert not p.applicable
    with p.arm_pipeline():
        assert cls.arm_hook._record.get() is None


def assert_same_function(gm: torch.fx.GraphModule, module: torch.nn.Module, x: torch.Tensor, tol: float = 0.0) -> None:
    """The rewritten graph computes what the module does, on x, within tol."""
    got = gm(x)
    torch.testing.assert_close(got[0] if isinstance(got, (tuple, list)) else got, module(x), rtol=tol, atol=tol)
