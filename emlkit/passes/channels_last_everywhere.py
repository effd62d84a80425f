"""Every 4-D activation channels-last in the Cortex-M flow (before quantization).

Matches, in the exported float graph of the default (dim-order) Cortex-M flow,
any op whose 4-D float output is not channels-last in memory: a permute or
transpose of H and W, a reshape to a new 4-D shape, and ops computed from them;
also every 4-D reshape read by a non-view op, and a one-channel output with NCHW
strides. After each copy the strides of the graph are recomputed (fake tensor
propagation), so an op after it is judged by the layout it will really get.

Produces `clone(y, memory_format=torch.channels_last)` after each such op (a
dim-order copy in the program; its quantization is shared with y, so it moves
bytes only).

Why: the Cortex-M flow runs CMSIS-NN's NHWC kernels on channels-last tensors;
our firmware checks every 4-D operand's dim order. A `permute(0, 1, 3, 2)`
returns a tensor in NCHW order, and the conv after it compiled into a program
whose device run stopped with "quantized_conv2d: input must be channels-last
(dim order 0,2,3,1); got dim order 0,1,2,3" (found by scripts/fuzz_models.py).
Found later by the same generator (seed 100): a permute round trip (the second
permute looked channels-last in the export's strides, computed before the first
copy existed); a reshape followed by an upsample or a padded pool (to_edge makes
every view_copy's output contiguous, and the ops after it inherited NCHW); a
one-channel upsample feeding a 1x1 conv (NCHW strides made the conv contiguous,
and ExecuTorch left it in float); and a 1-D layer's output unsqueezed into a
1x1 conv (the squeeze of the 2-D form's channels-last output, unsqueezed again,
looked channels-last in the export but is an unsqueeze_copy with a contiguous
output in the edge program).
"""

from __future__ import annotations

from typing import Any

import torch
from torch.fx.passes.fake_tensor_prop import FakeTensorProp

from emlkit.passes.graph import Rewrite, copy_meta
from emlkit.passes.manager import declare

aten = torch.ops.aten


# Views that the edge program makes *_copy ops with contiguous outputs, whatever strides the export gave them.
_VIEWS = (aten.reshape.default, aten.view.default, aten._unsafe_view.default, aten.unsqueeze.default,
          aten.squeeze.default, aten.squeeze.dim, aten.squeeze.dims)


def _both_layouts_differ(val: torch.Tensor) -> bool:
    # [N, 1, H, W] and [N, C, 1, 1] have the same bytes in both orders.
    return val.shape[1] > 1 and val.shape[2] * val.shape[3] > 1


def _needs_copy(n: torch.fx.Node) -> bool:
    val = n.meta.get("val")
    if not isinstance(val, torch.Tensor) or val.dim() != 4 or not val.dtype.is_floating_point:
        return False
    if n.op != "call_function" or not n.users:
        return False
    if n.target is aten.clone.default and n.kwargs.get("memory_format") is torch.channels_last:
        return False
    if n.target in _VIEWS and _both_layouts_differ(val) and \
            any(u.op != "output" and u.target not in _VIEWS for u in n.users):
        # A reshape or unsqueeze the export computed as a channels-last view is a view_copy (unsqueeze_copy) in
        # the edge program, and to_edge gives it a contiguous output: the ops after it would read NCHW bytes.
        return True
    if val.shape[1] == 1 and val.shape[2] * val.shape[3] > 1 and val.stride()[1] != 1:
        # One channel: NCHW and NHWC bytes are the same, so both is_contiguous checks pass, but a conv picks
        # its output layout from the strides: NCHW strides gave a contiguous conv ExecuTorch left in float.
        return True
    return not val.is_contiguous(memory_format=torch.channels_last)


class _Strides:
    """Recomputes, node by node in graph order, the fake values of the ops after the first copy: a copy
    changes the strides of everything after it (a permute of a channels-last tensor is no longer the
    channels-last tensor the export saw). Each node is recomputed once, from its inputs' current values,
    just before it is judged, so the whole pass costs one propagation however many copies it inserts."""

    def __init__(self, gm: torch.fx.GraphModule) -> None:
        self.gm = gm
        self.prop: FakeTensorProp | None = None
        self.mode: Any = None

    def refresh(self, n: torch.fx.Node) -> None:
        if n.op != "call_function":
            return
        if self.prop is None:
            vals = [m.meta["val"] for m in self.gm.graph.nodes if m.op == "placeholder"]
            self.mode = next(v.fake_mode for v in vals if hasattr(v, "fake_mode"))
            self.prop = FakeTensorProp(self.gm, self.mode)
        env = self.prop.env
        for x in n.all_input_nodes:
            if x not in env:
                env[x] = x.meta["val"]
        with self.mode:
            env[n] = self.prop.run_node(n)  # also stores n.meta["val"]


@declare("pre_quant", ("aten.permute", "aten.transpose", "aten.view", "aten.reshape", "aten.unsqueeze", "aten.squeeze",
                       "one-channel 4-D outputs"),
         runs_after=("*",), order=110, flows=("cortex_m",), options={"explicit_layout": False})
class ChannelsLastEverywhere(Rewrite):
    report_name = "copied"

    def run(self, gm: torch.fx.GraphModule) -> list[str]:
        g, copied = gm.graph, []
        strides = _Strides(gm)
        for n in list(g.nodes):
            if copied:
                strides.refresh(n)
            if not _needs_copy(n):
                continue
            with g.inserting_after(n):
                cl = g.call_function(aten.clone.default, (n,), {"memory_format": torch.channels_last})
            n.replace_all_uses_with(cl, delete_user_cb=lambda u: u is not cl)
            copy_meta(n, [cl])
            val = n.meta["val"]
            cl.meta["val"] = val.clone(memory_format=torch.channels_last)
            copied.append(n.name)
        if copied:
            g.lint()
            gm.recompile()
        return copied
