"""Scratch sizes and kernel choices for our Cortex-M kernels, recorded in the program.

Matches the `cortex_m::quantized_conv2d`, `quantized_depthwise_conv2d` and
`quantized_avg_pool2d` nodes (and their `_nhwc` forms) of the final Cortex-M program, whose last argument
is a scratch tensor (an `alloc` node, planned memory) that ExecuTorch sizes
for CMSIS-NN.

Produces the same nodes with each scratch resized to the larger of that size
and what our kernel asks for: the kernels' own `<kernel>_get_buffer_size`, called
in the firmware's host library (emlkit.hostfw), so the program still runs with
CMSIS-NN and now also with our kernels, which never take scratch from the stack.
The report lists the kernel each node's MVE path runs (the firmware's own choice
for the shape) and the scratch bytes added. Runs after every pass that creates or
reshapes these nodes.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import torch
from torch.fx.passes.infra.pass_base import PassBase, PassResult

from executorch.exir import memory
from executorch.exir.dialects._ops import ops as exir_ops

from emlkit import hostfw
from emlkit.passes.manager import Pass, declare

# Runs after: CortexMPassManager (creates the nodes), CancelTransposes. Precedes: VerifyProgram.
CONV_OPS = ("quantized_conv2d", "quantized_conv2d_nhwc")
DW_OPS = ("quantized_depthwise_conv2d", "quantized_depthwise_conv2d_nhwc")
AVG_OPS = ("quantized_avg_pool2d", "quantized_avg_pool2d_nhwc")


def _ceil(n: int, m: int) -> int:
    return (n + m - 1) // m * m


def multiplier_forms(n: int, out_c: int, depthwise: bool) -> tuple[bool, bool]:
    """(the program carries the folded bias a kernel reads in place, and the depthwise blocks), from the length n
    of the multipliers tensor, as emlkit/passes/window_bias.py writes it."""
    if out_c <= 0:
        return False, False
    blocks = depthwise and n == 2 * out_c + _ceil(out_c, 16) // 16 * 48
    beff = n == out_c + (out_c if depthwise else _ceil(out_c, 4)) or blocks
    return beff, blocks


def _shape(n: Any) -> list[int]:
    return list(n.meta["val"].shape)


def _numel(n: Any) -> int:
    """Entries of a tensor argument (a graph node), -1 when unknown."""
    v = n.meta.get("val") if isinstance(n, torch.fx.Node) else None
    return int(v.numel()) if v is not None else -1


def _resize(alloc: torch.fx.Node, size: int) -> None:
    alloc.args = (((size,), torch.uint8),)
    alloc.meta["val"] = torch.empty((size,), dtype=torch.uint8, device="meta")


@declare("post", ("cortex_m.quantized_conv2d", "cortex_m.quantized_depthwise_conv2d", "cortex_m.quantized_avg_pool2d"),
         runs_after=("*", "FoldInputOffset"), order=320)
class KernelScratch(Pass, PassBase):
    report_key = "kernel_scratch"

    def __init__(self) -> None:
        super().__init__()
        self.variants: Counter[str] = Counter()
        self.added = 0

    def report(self) -> dict[str, Any]:
        return {"kernels": dict(sorted(self.variants.items())), "scratch_bytes_added": self.added}

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        self.variants.clear()
        self.added = 0
        cm = exir_ops.edge.cortex_m
        targets = {getattr(cm, n).default: n for n in (*CONV_OPS, *DW_OPS, *AVG_OPS) if hasattr(cm, n)}
        changed = False
        for n in graph_module.graph.nodes:
            name = targets.get(n.target) if n.op == "call_function" else None
            if name is None:
                continue
            x, w = n.args[0], n.args[1]
            nhwc = name.endswith("_nhwc")
            xs = _shape(x)
            in_c = xs[3] if nhwc else xs[1]
            if name in AVG_OPS:
                k = list(w) if isinstance(w, (list, tuple)) else [int(w), int(w)]
                k = k * 2 if len(k) == 1 else k
                need = hostfw.avg_pool2d_s8(int(k[0]), int(k[1]), in_c)
                self.variants["avgpool_table" if need else "avgpool_direct"] += 1
                changed |= self._fit(n.args[-1], need)
                continue
            ws = _shape(w)  # conv OHWI, depthwise 1HWO (as the cortex_m pass stores them)
            stride, pad = (int(n.args[3][0]), int(n.args[3][1])), (int(n.args[4][0]), int(n.args[4][1]))
            if name in CONV_OPS:
                groups = in_c // ws[3] if ws[3] else 1
                need, path = hostfw.conv2d_s8(ws[3] * groups, ws[0], ws[1], ws[2], stride, pad, groups,
                                              int(n.args[6]))
            else:
                folded, blocks = multiplier_forms(_numel(n.args[9]), ws[3], True)
                need, path = hostfw.depthwise_conv2d_s8(in_c, ws[3], ws[1], ws[2], stride, pad, int(n.args[7]),
                                                        folded and blocks)
            self.variants[path] += 1
            changed |= self._fit(n.args[-1], need)
        return PassResult(graph_module, changed)

    def _fit(self, alloc: Any, need: int) -> bool:
        """Grow the scratch alloc node to `need` bytes; whether it changed."""
        if not isinstance(alloc, torch.fx.Node) or alloc.target is not memory.alloc:
            return False
        have = int(_shape(alloc)[0]) if _shape(alloc) else 0
        if need <= have:
            return False
        _resize(alloc, need)
        self.added += need - have
        return True
