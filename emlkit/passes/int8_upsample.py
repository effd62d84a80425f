"""Integer nearest upsampling as `emlkit::upsample_nearest2d` in the final Cortex-M program.

Matches `aten.upsample_nearest2d` (`.vec` or `.default`) on an integer (quantized)
4-D input whose output size is an integer multiple of the input size in H and W
(upsample_shared_qparams.py gives it its input's qparams, so it moves codes only).

Produces `emlkit::upsample_nearest2d(x, scale_h, scale_w)` (emlkit/emlkit_ops.py),
same output shape and memory format. torch's nearest index for an integer
factor k is floor(dst / k), which is what that op computes.

Any other output size (a non-integer factor, a downscale, scale factors that
differ from the size ratio) becomes `emlkit::upsample_nearest2d_index(x, rows,
cols)` with the source row of every output row and the source column of every
output column. torch picks them with float arithmetic (floor(dst * scale) in
float32, scale = in/out or 1/scale_factor), which integer division does not
reproduce: 4 -> 82 rows takes input row 1 for output row 41, where 41 * 4 / 82
= 2. The tables are therefore taken from torch itself: the same upsample call
run on a float tensor of element numbers.

Why: torch's CPU kernel has no int8 channels-last nearest upsample (the host
reference could not run the program), and our firmware implements both
emlkit ops (firmware/ops/emlkit_ops.c). An input of 2^24 elements or more per
channel (not exactly numbered in float32) is refused by name with its sizes.
"""

from __future__ import annotations


import torch
from executorch.exir.dialects._ops import ops as exir_ops
from torch.fx.passes.infra.pass_base import PassResult

import emlkit.emlkit_ops  # noqa: F401  (defines emlkit::upsample_nearest2d and _index)
from emlkit.errors import EXIT_UNSUPPORTED, AotError
from emlkit.passes.graph import PostPass
from emlkit.passes.manager import declare

_UPSAMPLE = {exir_ops.edge.aten.upsample_nearest2d.vec, exir_ops.edge.aten.upsample_nearest2d.default}


def _int_io(n: torch.fx.Node) -> tuple[torch.Tensor, torch.Tensor] | None:
    """The input and output values of the upsample N when its input is integer (quantized), else None."""
    x = n.args[0]
    xv, yv = x.meta.get("val") if isinstance(x, torch.fx.Node) else None, n.meta.get("val")
    if not isinstance(xv, torch.Tensor) or not isinstance(yv, torch.Tensor) or xv.dtype.is_floating_point:
        return None
    return xv, yv


def _factors(n: torch.fx.Node) -> tuple[int, int] | None:
    io = _int_io(n)
    if io is None or io[0].dim() != 4:
        return None
    xv, yv = io
    (h, w), (oh, ow) = xv.shape[2:], yv.shape[2:]
    if h == 0 or w == 0 or oh % h or ow % w:
        return None
    # With scale factors given torch indexes floor(dst / scale): equal to dst // k only for integer scales.
    scales = n.args[2] if n.target is exir_ops.edge.aten.upsample_nearest2d.vec and len(n.args) > 2 else None
    if scales is not None and any(float(s) != k for s, k in zip(scales, (oh // h, ow // w))):
        return None
    return oh // h, ow // w


MAX_NUMBERED = 1 << 24  # float32 numbers every element of an h x w plane exactly below this


def torch_indices(op: object, args: tuple, kwargs: dict, h: int, w: int) -> tuple[list[int], list[int]] | None:
    """(rows, cols): the input row and column torch's nearest kernel `op` (an aten.upsample_nearest2d
    overload, called with ARGS and KWARGS after its input) reads for each output row and column of an h x w
    map, or None if its output is not a separable nearest resize."""
    if h * w == 0 or h * w >= MAX_NUMBERED:
        return None
    numbers = torch.arange(h * w, dtype=torch.float32).reshape(1, 1, h, w)
    got = op(numbers, *args, **kwargs)  # type: ignore[operator]
    if got.dim() != 4 or got.numel() == 0:
        return None
    flat = got[0, 0].to(torch.int64)
    rows, cols = flat[:, 0] // w, flat[0, :] % w
    if not torch.equal(flat, rows[:, None] * w + cols[None, :]):
        return None
    return rows.tolist(), cols.tolist()


def index_tables(n: torch.fx.Node) -> tuple[list[int], list[int]] | None:
    """torch_indices of the integer upsample N, or None if N is not one we can number."""
    io = _int_io(n)
    if io is None or io[0].dim() != 4 or io[1].dim() != 4:
        return None
    xv, yv = io
    op = torch.ops.aten.upsample_nearest2d.vec if n.target is exir_ops.edge.aten.upsample_nearest2d.vec \
        else torch.ops.aten.upsample_nearest2d.default
    tables = torch_indices(op, tuple(n.args[1:]), dict(n.kwargs), xv.shape[2], xv.shape[3])
    if tables is None or (len(tables[0]), len(tables[1])) != tuple(yv.shape[2:]):
        return None
    return tables


def _refuse(n: torch.fx.Node) -> None:
    """An integer upsample neither op takes has no kernel anywhere: say so by name, before the host
    reference (torch has no int8 channels-last nearest kernel) fails on it."""
    from emlkit.verify import _source_line

    io = _int_io(n)
    if io is None:
        return
    xv, yv = io
    size = "x".join(map(str, xv.shape[2:])) + " -> " + "x".join(map(str, yv.shape[2:]))
    raise AotError(f"op aten::upsample_nearest2d (node {n.name}, at {_source_line(n)}) cannot be lowered: nearest "
                   f"resizing {size} of a {xv.dim()}-D tensor is not supported on Cortex-M (4-D, fewer than 2^24 "
                   "elements per channel); resize a 4-D tensor or split it into smaller maps", EXIT_UNSUPPORTED)


@declare("post", ("aten.upsample_nearest2d",), order=310)
class Int8Upsample(PostPass):
    report_name = "replaced"

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        self.done = []
        g = graph_module.graph
        for n in list(g.nodes):
            if n.op != "call_function" or n.target not in _UPSAMPLE:
                continue
            f = _factors(n)
            tables = index_tables(n) if f is None else None
            if f is None and tables is None:
                _refuse(n)
                continue
            with g.inserting_before(n):
                if f is not None:
                    up = g.call_function(exir_ops.edge.emlkit.upsample_nearest2d.default, (n.args[0], f[0], f[1]))
                else:
                    up = g.call_function(exir_ops.edge.emlkit.upsample_nearest2d_index.default, (n.args[0], *tables))
            up.meta.update(n.meta)
            n.replace_all_uses_with(up)
            g.erase_node(n)
            self.done.append(up.name)
        if self.done:
            g.lint()
            graph_module.recompile()
        return PassResult(graph_module, bool(self.done))
