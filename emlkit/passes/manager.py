"""Pass manager: every pass declares where it runs; this finds, orders and checks them.

Every pass class derives from `Pass` and declares, with the `@declare(stage, ops, order=...,
runs_after=..., runs_before=...)` class decorator (which sets these class attributes):
- `stage`: one of STAGES, the point of the flow that calls it (and so its calling convention):
  after export (pre_quant), the quantizer's annotation (quantizer_hook), after quantization
  (pre_edge), the lowered Cortex-M program (program), after to_edge (post), the final check (check);
- `ops`: the ops it matches or configures (documentation, checked to be non-empty);
- `order`: a number, unique among all passes, that breaks ties where the constraints leave a choice;
- `runs_after` / `runs_before`: names of other pass classes that must run before / after it.
  `ALL` ("*") in `runs_after` means after every other pass of its stage (at most one pass a stage
  may say so; two would contradict each other);
- where it applies (empty: everywhere): `flows` ("cortex_m", "ethos_u", "ethos_u_cpu"), `targets`
  (compile target names or families as fnmatch patterns, e.g. "ethos-u55*"), `bits` ("int8" or "a16w8"
  activations) and `options` (LowerOptions flags and the value they must have, e.g. {"explicit_layout": False}).
  "ethos_u_cpu" is the CPU side of an Ethos-U compile: a pass declared for it (and not for "ethos_u") rewrites
  there only the nodes ExecuTorch's NPU partitioner left on the CPU in float (`cpu_nodes`, which the Ethos-U
  flow sets after a first lowering, emlkit/lower/ethos_u.py), never what the NPU takes. Such a pass derives
  from a skeleton that asks `may_rewrite(node)` before each rewrite (`honours_cpu_nodes`).

A pass does not decide for itself whether it runs. The manager does, from the declaration alone
(`applies_to`): `configure(opts, target=...)` / `install(opts, passes, target)` put into a target's
pipeline only the passes that apply to it, and `pipeline(opts, target)` lists them. Where the options
are configured once for any target, the flow calls every pass's `set_target` before a compile
(emlkit.lower.bind_passes): `Pass` stores the verdict in `applicable` and calls `bind` (the pass's
target settings, a genuine parameter such as a layout or a backend, never an on/off switch) only when
it applies. `Pass.__call__` is how the flow calls every pass, whatever its stage: it clears the last
report (`reset`), then runs the pass's `work` when the verdict says it applies, else hands the graph,
program or quantizer back unchanged (`skip`; its report entry stays, empty). A pass body is `work`
(or the `run`/`rewrite`/`configure` of the shared skeletons in emlkit/passes/graph.py and
emlkit/passes/quantizer_hooks.py) and just does its job.

`discover` imports every module of emlkit/passes (pkgutil; `_`-prefixed helper modules and
NOT_PASS_MODULES hold helpers only) and returns the declared pass classes. `order` sorts passes
topologically (ties by `order`), and refuses an undeclared pass, a name no given pass has, a
constraint against the stage order, and a cycle, with PassOrderError (an internal error: the
toolkit's own declarations are wrong). `install` puts the ordered passes into a LowerOptions'
per-stage lists and logs the pipeline (`pipeline` gives it as pass names per stage).
"""

from __future__ import annotations

import heapq
import importlib
import logging
import pkgutil
from fnmatch import fnmatch
from pathlib import Path
from typing import Any, Callable, ClassVar, Iterable

from emlkit.errors import EXIT_INTERNAL, AotError
from emlkit.lower import LowerOptions

# Flow order; each stage is one LowerOptions list.
STAGES: tuple[str, ...] = ("pre_quant", "quantizer_hook", "pre_edge", "program", "post", "check")
STAGE_FIELD: dict[str, str] = {
    "pre_quant": "pre_quant_passes",
    "quantizer_hook": "quantizer_hooks",
    "pre_edge": "pre_edge_passes",
    "program": "program_passes",
    "post": "post_passes",
    "check": "program_checks",
}
ALL = "*"
FLOWS = ("cortex_m", "ethos_u", "ethos_u_cpu")
CPU_SIDE = "ethos_u_cpu"  # the nodes an Ethos-U compile leaves on the CPU (module docstring)
BITS = {8: "int8", 16: "a16w8"}  # activation bits -> the declaration's name
TARGET_FAMILIES = ("cortex-m", "ethos-u")  # how every compile target name (and `targets` pattern) starts
# Modules of emlkit/passes without a `_` prefix that hold helpers of a pass, not a pass.
NOT_PASS_MODULES = frozenset({"manager", "graph", "lut_fusion", "lut_ethos_u"})

log = logging.getLogger(__name__)


class PassOrderError(AotError):
    def __init__(self, message: str) -> None:
        super().__init__(f"internal error in the pass declarations: {message}", EXIT_INTERNAL)


class Pass:
    """Base of every pass: the declaration (set by `declare`), the manager's verdict, how the flow calls it
    and how `configure` builds one."""

    stage: ClassVar[str]
    ops: ClassVar[tuple[str, ...]]
    order: ClassVar[int]
    runs_after: ClassVar[tuple[str, ...]] = ()
    runs_before: ClassVar[tuple[str, ...]] = ()
    flows: ClassVar[tuple[str, ...]] = ()
    targets: ClassVar[tuple[str, ...]] = ()
    bits: ClassVar[tuple[str, ...]] = ()
    options: ClassVar[dict[str, bool]] = {}
    # The compile report's entry for `report()`, where the pass has one (declare: the module's name).
    report_key: ClassVar[str] = ""
    # The manager's verdict for the bound target (set_target); True until bound, so a pass built
    # on its own (tests) runs.
    applicable: bool = True
    # Declared for CPU_SIDE: the pass's rewrite asks `may_rewrite` before each node.
    honours_cpu_nodes: ClassVar[bool] = False
    # On an Ethos-U target a pass that applies only as CPU_SIDE may rewrite just the nodes whose sources
    # (`source_names`) are in this set (empty until the flow has seen what the partitioner left on the CPU);
    # None: any node.
    cpu_nodes: frozenset[str] | None = None

    def set_target(self, target: Any, options: Any) -> None:
        """Called by the flow before each compile: the manager's verdict, then (where it applies) the
        pass's target settings."""
        self.applicable = applies_to(type(self), target, options)
        self.cpu_nodes = frozenset() if cpu_side_only(type(self), target) else None
        if self.applicable:
            self.bind(target, options)

    def may_rewrite(self, node: Any) -> bool:
        """Whether the pass may rewrite NODE: any node, or on an Ethos-U CPU side one the NPU left there."""
        return self.cpu_nodes is None or not self.cpu_nodes.isdisjoint(source_names(node))

    def bind(self, target: Any, options: Any) -> None:
        """Settings that depend on the target, for a target the pass applies to (not whether it runs:
        that is the declaration's)."""

    def __call__(self, subject: Any, *rest: Any) -> Any:
        """How the flow calls a pass of any stage: `work` on the graph / program / quantizer where the
        manager's verdict says the pass applies, `subject` unchanged (`skip`) where it does not."""
        self.reset()
        if not self.applicable:
            return self.skip(subject)
        return self.work(subject, *rest)

    def reset(self) -> None:
        """Clear what the report says about the last run (before every call)."""

    def work(self, subject: Any, *rest: Any) -> Any:
        """The pass's job. By default the next base's call: ExecuTorch's PassBase for the post passes."""
        return super().__call__(subject, *rest)  # type: ignore[misc]

    def skip(self, subject: Any) -> Any:
        """What the flow gets back from a pass that does not apply: its input, unchanged."""
        from torch.fx.passes.infra.pass_base import PassBase, PassResult

        return PassResult(subject, False) if isinstance(self, PassBase) else subject

    @classmethod
    def create(cls, opts: LowerOptions, allow_float: bool) -> "Pass":
        """The instance the compile runs; passes with settings from the options override this."""
        return cls()


def declare(stage: str, ops: tuple[str, ...], *, order: int, runs_after: tuple[str, ...] = (),
            runs_before: tuple[str, ...] = (), flows: tuple[str, ...] = (), targets: tuple[str, ...] = (),
            bits: tuple[str, ...] = (), options: dict[str, bool] | None = None) -> Callable[[type], type]:
    """Class decorator: the pass's stage, the ops it rewrites, its tie-break order, its ordering
    constraints (checked by `order`) and where it applies (checked by `applies_to`)."""
    def apply(cls: type) -> type:
        if not issubclass(cls, Pass):
            raise PassOrderError(f"pass {cls.__name__} does not derive from emlkit.passes.manager.Pass")
        unknown = [f for f in flows if f not in FLOWS] + [b for b in bits if b not in BITS.values()]
        if unknown:
            raise PassOrderError(f"pass {cls.__name__} declares unknown flows/bits {unknown}")
        if CPU_SIDE in flows and not getattr(cls, "honours_cpu_nodes", False):
            raise PassOrderError(f"pass {cls.__name__} declares flow {CPU_SIDE} but its rewrite does not ask "
                                 "may_rewrite (derive it from a skeleton with honours_cpu_nodes)")
        not_targets = [t for t in targets if not t.startswith(TARGET_FAMILIES)]
        if not_targets:
            raise PassOrderError(f"pass {cls.__name__} declares targets {not_targets} that are no compile targets "
                                 "(`targets` names compile targets; the ops a pass rewrites are its `ops`)")
        cls.stage, cls.ops, cls.order = stage, tuple(ops), order  # type: ignore[attr-defined]
        cls.runs_after, cls.runs_before = tuple(runs_after), tuple(runs_before)  # type: ignore[attr-defined]
        cls.flows, cls.targets, cls.bits = tuple(flows), tuple(targets), tuple(bits)  # type: ignore[attr-defined]
        cls.options = dict(options or {})  # type: ignore[attr-defined]
        if callable(getattr(cls, "report", None)) and not getattr(cls, "report_key", ""):
            # the compile report's entry for the pass's report: by default the name of its module
            cls.report_key = cls.__module__.rsplit(".", 1)[-1]  # type: ignore[attr-defined]
        cls.declared = cls  # type: ignore[attr-defined]  # a subclass of a pass is not declared by inheritance
        return cls
    return apply


def applies_to(cls: type, target: Any, options: Any) -> bool:
    """Whether the declaration of pass class `cls` covers `target` (an emlkit.targets.Target) under
    `options` (a LowerOptions; None means the defaults)."""
    opts = options if options is not None else LowerOptions()
    flows, targets = getattr(cls, "flows", ()), getattr(cls, "targets", ())
    bits, needs = getattr(cls, "bits", ()), getattr(cls, "options", {})
    return ((not flows or target.flow in flows or (target.flow == "ethos_u" and CPU_SIDE in flows))
            and (not targets or any(fnmatch(target.name, t) for t in targets))
            and (not bits or BITS[target.activation_bits] in bits)
            and all(getattr(opts, k) == v for k, v in needs.items()))


def cpu_side_only(cls: type, target: Any) -> bool:
    """Whether pass class `cls` applies to `target` only as the CPU side of an Ethos-U compile."""
    flows = getattr(cls, "flows", ())
    return target.flow == "ethos_u" and CPU_SIDE in flows and "ethos_u" not in flows


def source_names(node: Any) -> list[str]:
    """The names of the nodes of the model's first export that NODE comes from (torch.fx's `from_node`
    provenance, which export, the quantizer's conversion and to_edge keep): one node's identity across them."""
    names = []
    for src in node.meta.get("from_node") or []:
        while getattr(src, "from_node", None):
            src = src.from_node[-1]
        names.append(src.name)
    return names


def discover() -> list[type]:
    """Every declared pass class of the modules of emlkit/passes, in `order`."""
    found: list[type] = []
    for info in pkgutil.iter_modules([str(Path(__file__).parent)]):  # this package's modules, by their files
        if info.name.startswith("_") or info.name in NOT_PASS_MODULES:
            continue
        module = importlib.import_module(f"{__package__}.{info.name}")
        found += [c for c in vars(module).values() if isinstance(c, type) and c.__module__ == module.__name__
                  and getattr(c, "declared", None) is c]
    return sorted(found, key=lambda c: c.order)


def pass_name(p: Any) -> str:
    return type(p).__name__


def _declared(p: Any) -> tuple[str, tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    name = pass_name(p)
    missing = [a for a in ("stage", "ops", "order", "runs_after", "runs_before") if not hasattr(type(p), a)]
    if missing:
        raise PassOrderError(f"pass {name} does not declare {', '.join(missing)} (see emlkit/passes/manager.py)")
    stage = type(p).stage
    if stage not in STAGES:
        raise PassOrderError(f"pass {name} declares unknown stage {stage!r} (one of {', '.join(STAGES)})")
    ops, after, before = tuple(type(p).ops), tuple(type(p).runs_after), tuple(type(p).runs_before)
    if not ops:
        raise PassOrderError(f"pass {name} declares no ops")
    return stage, ops, after, before


def order(passes: Iterable[Any]) -> list[Any]:
    """The passes in a valid run order: by stage, then topologically by runs_after/runs_before, ties by `order`."""
    given = list(passes)
    decl = {}
    for p in given:
        name = pass_name(p)
        if name in decl:
            raise PassOrderError(f"pass {name} is given twice")
        decl[name] = _declared(p)
    rank = {s: i for i, s in enumerate(STAGES)}
    edges: dict[str, set[str]] = {n: set() for n in decl}      # a -> b: a runs before b
    for name, (stage, _, after, before) in decl.items():
        for other in (*after, *before):
            if other != ALL and other not in decl:
                raise PassOrderError(f"pass {name} names unknown pass {other!r} in runs_after/runs_before")
        if ALL in before:
            raise PassOrderError(f"pass {name}: {ALL!r} is only allowed in runs_after")
        if ALL in after:
            peers = [o for o, d in decl.items() if o != name and d[0] == stage]
            clash = [o for o in peers if ALL in decl[o][2]]
            if clash:
                raise PassOrderError(f"passes {name} and {clash[0]} both run after every other pass of stage {stage}")
            after = (*[a for a in after if a != ALL], *peers)
        for first, then in [(a, name) for a in after] + [(name, b) for b in before]:
            if first == then:
                raise PassOrderError(f"pass {name} is ordered against itself")
            if rank[decl[first][0]] > rank[decl[then][0]]:
                raise PassOrderError(f"{first} ({decl[first][0]}) must run before {then} ({decl[then][0]}), "
                                     "against the stage order")
            edges[first].add(then)
    # Kahn's algorithm; among ready passes the earliest stage, then the lowest `order`, goes first.
    orders = {pass_name(p): type(p).order for p in given}
    if len(set(orders.values())) != len(orders):
        raise PassOrderError(f"two passes declare the same order: {sorted(orders.items(), key=lambda kv: kv[1])}")
    key = {n: (rank[decl[n][0]], orders[n]) for n in decl}
    indeg = {n: 0 for n in decl}
    for outs in edges.values():
        for b in outs:
            indeg[b] += 1
    ready = [(key[n], n) for n, d in indeg.items() if d == 0]
    heapq.heapify(ready)
    out: list[str] = []
    while ready:
        _, n = heapq.heappop(ready)
        out.append(n)
        for b in edges[n]:
            indeg[b] -= 1
            if indeg[b] == 0:
                heapq.heappush(ready, (key[b], b))
    if len(out) != len(decl):
        stuck = sorted(n for n in decl if n not in out)
        raise PassOrderError(f"runs_after/runs_before form a cycle among {', '.join(stuck)}")
    # A stage's passes must be contiguous: a later stage's pass cannot be scheduled before an earlier one.
    stages = [rank[decl[n][0]] for n in out]
    assert stages == sorted(stages), "cross-stage edges follow the stage order"
    by_name = {pass_name(p): p for p in given}
    return [by_name[n] for n in out]


def install(opts: LowerOptions, passes: Iterable[Any], target: Any = None) -> None:
    """Append the ordered passes to the LowerOptions list of their stage; given a target, only those that
    apply to it (`applies_to`), already bound to it."""
    for p in order(passes):
        if target is not None:
            if not applies_to(type(p), target, opts):
                continue
            set_target = getattr(p, "set_target", None)
            if set_target is not None:
                set_target(target, opts)
        getattr(opts, STAGE_FIELD[type(p).stage]).append(p)
    log.debug("pass pipeline: %s", pipeline(opts))


def pipeline(opts: LowerOptions, target: Any = None) -> dict[str, list[str]]:
    """The installed passes' names per stage, in run order; given a target, those that apply to it."""
    return {s: [pass_name(p) for p in getattr(opts, STAGE_FIELD[s])
                if target is None or applies_to(type(p), target, opts)] for s in STAGES}
