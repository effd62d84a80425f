"""Pass manager: every pass declares where it runs; this orders and checks them.

Each pass class declares, with the `@declare(stage, targets, runs_after=..., runs_before=...)` class
decorator (which sets these class attributes):
- `stage`: one of STAGES, the point of the flow that calls it (and so its calling convention);
- `targets`: the ops it matches or configures (documentation, checked to be non-empty);
- `runs_after` / `runs_before`: names of other pass classes that must run before / after it.
  `ALL` ("*") in `runs_after` means after every other pass of its stage (at most one pass a stage
  may say so; two would contradict each other).

`order` sorts the passes topologically (ties keep the order they were given in), and refuses an
undeclared pass, a name no given pass has, a constraint against the stage order, and a cycle,
with PassOrderError (an internal error: the toolkit's own declarations are wrong).
`install` puts the ordered passes into a LowerOptions' per-stage lists.
"""

from __future__ import annotations

import heapq
from typing import Any, Callable, Iterable

from aot.errors import EXIT_INTERNAL, AotError
from aot.lower import LowerOptions

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


class PassOrderError(AotError):
    def __init__(self, message: str) -> None:
        super().__init__(f"internal error in the pass declarations: {message}", EXIT_INTERNAL)


def declare(stage: str, targets: tuple[str, ...], runs_after: tuple[str, ...] = (),
            runs_before: tuple[str, ...] = ()) -> Callable[[type], type]:
    """Class decorator: the pass's stage, the ops it targets and its ordering constraints (checked by `order`)."""
    def apply(cls: type) -> type:
        cls.stage, cls.targets = stage, tuple(targets)  # type: ignore[attr-defined]
        cls.runs_after, cls.runs_before = tuple(runs_after), tuple(runs_before)  # type: ignore[attr-defined]
        return cls
    return apply


def pass_name(p: Any) -> str:
    return type(p).__name__


def _declared(p: Any) -> tuple[str, tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    name = pass_name(p)
    missing = [a for a in ("stage", "targets", "runs_after", "runs_before") if not hasattr(type(p), a)]
    if missing:
        raise PassOrderError(f"pass {name} does not declare {', '.join(missing)} (see aot/passes/manager.py)")
    stage = type(p).stage
    if stage not in STAGES:
        raise PassOrderError(f"pass {name} declares unknown stage {stage!r} (one of {', '.join(STAGES)})")
    targets, after, before = tuple(type(p).targets), tuple(type(p).runs_after), tuple(type(p).runs_before)
    if not targets:
        raise PassOrderError(f"pass {name} declares no targets")
    return stage, targets, after, before


def order(passes: Iterable[Any]) -> list[Any]:
    """The passes in a valid run order: by stage, then topologically by runs_after/runs_before."""
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
    # Kahn's algorithm; among ready passes the earliest stage, then the earliest given, goes first.
    index = {pass_name(p): i for i, p in enumerate(given)}
    key = {n: (rank[decl[n][0]], index[n]) for n in decl}
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


def install(opts: LowerOptions, passes: Iterable[Any]) -> None:
    """Append the ordered passes to the LowerOptions list of their stage."""
    for p in order(passes):
        getattr(opts, STAGE_FIELD[type(p).stage]).append(p)
