"""A part of one of our passes that runs inside ExecuTorch's Arm TOSA pipeline, after a named Arm pass.

ExecuTorch 1.5.1's `register_pass_insertions_after(ArmPassClass, [pass])` adds
a pass to every Arm pipeline the process builds from then on, and cannot take it
back. So a hook is registered once per process (`install()`) and acts only
inside `active(record)`, which the Ethos-U flow enters around the lowering of a
compile that configured the owning pass (`arm_pipeline()` on the pass); a
compile without the pass, or for another target, does not see it. The names the
rewrite returns are appended to `record` for the pass's report.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
from typing import Any, Callable, Iterator

import torch

log = logging.getLogger(__name__)


class ArmPipelineHook:
    """`rewrite(graph_module) -> changed node names`, run after the Arm pass `after()` returns, while active."""

    def __init__(self, name: str, after: Callable[[], type], rewrite: Callable[[torch.fx.GraphModule], list[str]]):
        self.name = name
        self._after = after  # a function so ExecuTorch's Arm backend is imported only when a hook is installed
        self._rewrite = rewrite
        self._record: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar(name, default=None)
        self._installed = False

    def install(self) -> None:
        """Register the hook in ExecuTorch's Arm pass manager, once per process."""
        if self._installed:
            return
        from executorch.backends.arm._passes.arm_pass import ArmPass
        from executorch.backends.arm._passes.arm_pass_manager import register_pass_insertions_after
        from executorch.exir.pass_base import PassResult

        hook = self

        class _HookPass(ArmPass):
            _passes_required_after: set[Any] = set()

            def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
                record = hook._record.get()
                if record is None:
                    return PassResult(graph_module, False)
                done = hook._rewrite(graph_module)
                record.extend(done)
                if done:
                    log.debug("%s: %s", hook.name, ", ".join(done))
                return PassResult(graph_module, bool(done))

        _HookPass.__name__ = _HookPass.__qualname__ = f"{type(self).__name__}_{self.name}"
        register_pass_insertions_after(self._after(), [_HookPass()])
        self._installed = True

    @contextlib.contextmanager
    def active(self, record: list[str] | None) -> Iterator[None]:
        """The hook acts (appending to RECORD) inside this block; with None it stays off."""
        token = self._record.set(record)
        try:
            yield
        finally:
            self._record.reset(token)
