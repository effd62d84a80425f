"""Integer nearest upsampling as `emlkit::upsample_nearest2d` in the final Cortex-M program.

Matches `aten.upsample_nearest2d` (`.vec` or `.default`) on an integer (quantized)
4-D input whose output size is an integer multiple of the input size in H and W
(upsample_shared_qparams.py gives it its input's qparams, so it moves codes only).

Produces `emlkit::upsample_nearest2d(x, scale_h, scale_w)` (aot/emlkit_ops.py),
same output shape and memory format. torch's nearest index for an integer
factor k is floor(dst / k), which is what that op computes.

Why: torch's CPU kernel has no int8 channels-last nearest upsample (the host
reference could not run the program), and our firmware implements the
emlkit op with block copies (firmware/ops/emlkit_ops.c). An integer upsample by
a non-integer factor is refused here, by name, with its sizes (no kernel takes it).
"""

from __future__ import annotations


import torch
from executorch.exir.dialects._ops import ops as exir_ops
from torch.fx.passes.infra.pass_base import PassBase, PassResult

import aot.emlkit_ops  # noqa: F401  (defines emlkit::upsample_nearest2d)
from aot.errors import EXIT_UNSUPPORTED, AotError
from aot.passes._graph import Recorder
from aot.passes.manager import declare

_UPSAMPLE = {exir_ops.edge.aten.upsample_nearest2d.vec, exir_ops.edge.aten.upsample_nearest2d.default}


def _factors(n: torch.fx.Node) -> tuple[int, int] | None:
    x = n.args[0]
    xv, yv = x.meta.get("val") if isinstance(x, torch.fx.Node) else None, n.meta.get("val")
    if not isinstance(xv, torch.Tensor) or not isinstance(yv, torch.Tensor) or xv.dim() != 4:
        return None
    if xv.dtype.is_floating_point:
        return None
    (h, w), (oh, ow) = xv.shape[2:], yv.shape[2:]
    if h == 0 or w == 0 or oh % h or ow % w:
        return None
    # With scale factors given torch indexes floor(dst / scale): equal to dst // k only for integer scales.
    scales = n.args[2] if n.target is exir_ops.edge.aten.upsample_nearest2d.vec and len(n.args) > 2 else None
    if scales is not None and any(float(s) != k for s, k in zip(scales, (oh // h, ow // w))):
        return None
    return oh // h, ow // w


def _refuse_non_integer(n: torch.fx.Node) -> None:
    """An integer upsample that _factors cannot take has no kernel anywhere: say so by name, before the host
    reference (torch has no int8 channels-last nearest kernel) fails on it."""
    from aot.verify import _source_line

    x = n.args[0]
    xv, yv = x.meta.get("val") if isinstance(x, torch.fx.Node) else None, n.meta.get("val")
    if not isinstance(xv, torch.Tensor) or not isinstance(yv, torch.Tensor) or xv.dtype.is_floating_point:
        return
    size = "x".join(map(str, xv.shape[2:])) + " -> " + "x".join(map(str, yv.shape[2:]))
    raise AotError(f"op aten::upsample_nearest2d (node {n.name}, at {_source_line(n)}) cannot be lowered: nearest "
                   f"upsampling {size} is not by an integer factor in H and W, and the firmware's upsample kernel "
                   "(emlkit::upsample_nearest2d) takes integer factors only; resize to a multiple of the input size",
                   EXIT_UNSUPPORTED)


@declare("post", ("aten.upsample_nearest2d",))
class Int8Upsample(Recorder, PassBase):
    report_key = "int8_upsample"
    report_name = "replaced"

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        self.done = []
        g = graph_module.graph
        for n in list(g.nodes):
            if n.op != "call_function" or n.target not in _UPSAMPLE:
                continue
            f = _factors(n)
            if f is None:
                _refuse_non_integer(n)
                continue
            with g.inserting_before(n):
                up = g.call_function(exir_ops.edge.emlkit.upsample_nearest2d.default, (n.args[0], f[0], f[1]))
            up.meta.update(n.meta)
            n.replace_all_uses_with(up)
            g.erase_node(n)
            self.done.append(up.name)
        if self.done:
            g.lint()
            graph_module.recompile()
        return PassResult(graph_module, bool(self.done))
