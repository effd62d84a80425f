"""Average pools the Ethos-U55 rejects, rewritten into pools and means it takes (Ethos-U flows only).

Matches `aten.avg_pool2d(x, kernel, stride, padding=0, ...)` in the exported
float graph, with no divisor_override, when a stride is above 3 (the U55 limit
the TOSA partitioner enforces, so such a pool ends up a float op on the CPU):

- the window covers the whole map (kernel == (H, W), output 1x1, e.g.
  `nn.AvgPool2d(8)` on an 8x8 map): produces `aten.mean.dim(x, [-2, -1],
  keepdim=True)`, which the Arm backend decomposes into NPU-sized pools and
  sums itself;
- non-overlapping windows (kernel == stride) that tile the map exactly and
  whose sizes factor into 2s and 3s (4, 6, 8, 9, 12, 16, ...): produces a
  cascade of avg_pool2d(f, stride=f) with f <= 3 whose product is the window.
  The mean of equal-sized block means is the block mean, so the float model is
  unchanged; the quantized one rounds once more per extra stage.

Anything else (overlapping windows with a large stride, padding, window sizes
with a prime factor above 3) is left as it is and reported.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import torch

from emlkit.passes.graph import Rewrite
from emlkit.passes.manager import declare

log = logging.getLogger(__name__)
aten = torch.ops.aten

MAX_STRIDE = 3
_KEEP_META = ("stack_trace", "nn_module_stack", "source_fn_stack", "from_node", "seq_nr")


def _pair(v: Any, default: Any = None) -> tuple[int, int]:
    if v is None or (isinstance(v, (list, tuple)) and len(v) == 0):
        v = default
    if isinstance(v, int):
        return (v, v)
    return (int(v[0]), int(v[-1]))


def small_factors(k: int) -> list[int] | None:
    """k as a product of factors <= MAX_STRIDE (largest first), or None if it has a larger prime factor."""
    out: list[int] = []
    for f in (3, 2):
        while k % f == 0 and k > 1:
            out.append(f)
            k //= f
    return out if k == 1 else None


# CMSIS-NN pools take any stride.
@declare("pre_quant", ("aten.avg_pool2d",), runs_after=("Conv1dAsConv2d",),
         order=80, flows=("ethos_u",))
@dataclass
class AvgPoolForNpu(Rewrite):
    skipped: list[dict[str, Any]] = field(default_factory=list)

    @property
    def rewritten(self) -> list[Any]:
        return self.done

    def report(self) -> dict[str, Any]:
        return {"rewritten": list(self.done), "skipped": list(self.skipped)}

    def reset(self) -> None:
        super().reset()
        self.skipped = []

    def run(self, gm: torch.fx.GraphModule) -> list[Any]:
        self.done = []  # _rewrite appends here as it goes
        changed = False
        for n in list(gm.graph.nodes):
            if n.op == "call_function" and n.target is aten.avg_pool2d.default:
                changed |= self._rewrite(gm, n)
        if changed:
            gm.graph.eliminate_dead_code()
            gm.graph.lint()
            gm.recompile()
        return self.done

    def _rewrite(self, gm: torch.fx.GraphModule, n: torch.fx.Node) -> bool:
        names = ["input", "kernel_size", "stride", "padding", "ceil_mode", "count_include_pad", "divisor_override"]
        a = dict(zip(names, n.args))
        a.update(n.kwargs)
        x = a["input"]
        xval = x.meta.get("val") if isinstance(x, torch.fx.Node) else None
        kernel = _pair(a["kernel_size"])
        stride = _pair(a.get("stride"), kernel)
        padding = _pair(a.get("padding", 0), 0)
        if max(stride) <= MAX_STRIDE:
            return False
        entry = {"node": n.name, "kernel": list(kernel), "stride": list(stride)}
        if not isinstance(xval, torch.Tensor) or xval.dim() != 4:
            self.skipped.append({**entry, "reason": "input shape unknown"})
            return False
        if padding != (0, 0) or a.get("divisor_override") is not None:
            self.skipped.append({**entry, "reason": "padded or divisor_override pool"})
            return False
        h, w = int(xval.shape[-2]), int(xval.shape[-1])
        g = gm.graph
        if kernel == (h, w):
            with g.inserting_before(n):
                new = g.call_function(aten.mean.dim, (x, [-2, -1], True))
            val = None
            if getattr(xval, "fake_mode", None) is not None:
                with xval.fake_mode:
                    val = xval.mean(dim=(-2, -1), keepdim=True)
            self._finish(n, [new], val)
            self.done.append({**entry, "as": "mean over H, W"})
            return True
        fh, fw = small_factors(kernel[0]), small_factors(kernel[1])
        if kernel != stride or h % kernel[0] or w % kernel[1] or fh is None or fw is None:
            self.skipped.append({**entry, "reason": "overlapping or non-tiling windows, or a window size with "
                                                    "a prime factor above 3"})
            return False
        steps = max(len(fh), len(fw))
        fh += [1] * (steps - len(fh))
        fw += [1] * (steps - len(fw))
        cur: Any = x
        cur_val = xval
        nodes = []
        fake = getattr(xval, "fake_mode", None)
        for kh, kw in zip(fh, fw):
            with g.inserting_before(n):
                cur = g.call_function(aten.avg_pool2d.default, (cur, [kh, kw], [kh, kw]))
            if fake is not None:
                with fake:
                    cur_val = torch.nn.functional.avg_pool2d(cur_val, (kh, kw), (kh, kw))
                cur.meta["val"] = cur_val
            nodes.append(cur)
        self._finish(n, nodes, None)
        self.done.append({**entry, "as": f"cascade {[list(p) for p in zip(fh, fw)]}"})
        return True

    @staticmethod
    def _finish(n: torch.fx.Node, new: list[torch.fx.Node], val: Any) -> None:
        for m in new:
            for k in _KEEP_META:
                if k in n.meta:
                    m.meta[k] = n.meta[k]
        if val is not None:
            new[-1].meta["val"] = val
        elif "val" not in new[-1].meta and "val" in n.meta:
            new[-1].meta["val"] = n.meta["val"]
        n.replace_all_uses_with(new[-1])
        n.graph.erase_node(n)
