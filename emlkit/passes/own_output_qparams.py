"""Quantizer annotation (Cortex-M): softmax and average pools get their own observed output qparams.

Targets, in the graph the quantizer annotates:
- `softmax` / `_softmax` (int8);
- average pools whose every window has the same number of taps: `avg_pool2d`
  without padding, ceil mode or divisor override, `adaptive_avg_pool2d` whose
  input size is a multiple of its output size, and `mean` over H and W of a
  4-D tensor with keepdim (the forms `emlkit_avg_pool.py` lowers), when the
  pool feeds the final classifier (a Linear or conv whose output is a graph
  output, through view/flatten).

Why: ExecuTorch's CortexMQuantizer fixes these outputs' format. Softmax is
written at scale 1/256, zero point -128 (CMSIS-NN's format), so a softmax whose
probabilities peak at 0.23 uses 58 of 256 codes; average pools share their
input's qparams, so a global average pool, whose output range is a fraction
of its input's, uses a few dozen codes. Ethos-U's quantizer observes both
outputs, which is the CPU/NPU SNR gap (softmax 6.4 dB, global_avgpool 4.2 dB,
attention 1.9 dB, see docs/parity.md).

What this does: before ExecuTorch's pattern quantizers run, each such op is
annotated with the quantizer's int8 per-tensor activation spec on its input and
output (an observer of its own) and marked as matched. The op then appears as
`dequantize -> op -> quantize` with free output qparams, which
`emlkit_softmax.py` and `emlkit_avg_pool.py` lower to `emlkit::` ops.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from emlkit.passes._quantizer_hooks import QuantizerHook, annotating_alone
from emlkit.passes.manager import declare

aten = torch.ops.aten

SOFTMAX = {aten.softmax.int, aten._softmax.default}
OWN_QPARAMS_KEY = "emlkit_own_output_qparams"
AVG_POOLS = {aten.avg_pool2d.default, aten.adaptive_avg_pool2d.default, aten.mean.dim}


def _shape(n: Any) -> tuple[int, ...] | None:
    """Shape of a node's tensor. Q/DQ nodes that convert_pt2e made and the table lookups LUT fusion made
    have no shape meta; all are elementwise: their input's shape."""
    if not isinstance(n, torch.fx.Node):
        return None
    val = n.meta.get("val")
    if (val is None and n.op == "call_function" and n.args
            and ("quantize_per_tensor" in str(n.target) or "quantized_activation" in str(n.target))):
        return _shape(n.args[0])
    return tuple(val.shape) if isinstance(val, torch.Tensor) else None


def pool_geometry(n: torch.fx.Node) -> tuple[list[int], list[int]] | None:
    """(kernel, stride) of an average pool whose windows all have k_h * k_w taps, else None."""
    shape = _shape(n.args[0])
    if shape is None or len(shape) != 4:
        return None
    h, w = shape[2], shape[3]
    if n.target == aten.avg_pool2d.default:
        args = list(n.args) + [None] * 7
        k = args[1]
        k = [k, k] if isinstance(k, int) else list(k)
        k = k * 2 if len(k) == 1 else k
        s = args[2] if args[2] is not None else []
        s = [s, s] if isinstance(s, int) else list(s)
        s = k if not s else (s * 2 if len(s) == 1 else s)
        pad = args[3] if args[3] is not None else [0, 0]
        pad = [pad, pad] if isinstance(pad, int) else list(pad)
        ceil = bool(n.kwargs.get("ceil_mode", args[4] or False))
        divisor = n.kwargs.get("divisor_override", args[6])
        if any(pad) or divisor is not None or k[0] > h or k[1] > w:
            return None
        if ceil and ((h - k[0]) % s[0] or (w - k[1]) % s[1]):
            return None                          # a partial last window has fewer taps
        return k, s
    if n.target == aten.adaptive_avg_pool2d.default:
        out = list(n.args[1])
        out = out * 2 if len(out) == 1 else out
        if any(o is None or o <= 0 for o in out) or h % out[0] or w % out[1]:
            return None
        k = [h // out[0], w // out[1]]
        return k, k
    if n.target == aten.mean.dim:
        dims = n.args[1] if len(n.args) > 1 else None
        keep = n.args[2] if len(n.args) > 2 else n.kwargs.get("keepdim", False)
        if not keep or n.kwargs.get("dtype") is not None or not isinstance(dims, (list, tuple)):
            return None
        if sorted(d % 4 for d in dims) != [2, 3]:
            return None
        return [h, w], [h, w]
    return None


CLASSIFIERS = {aten.linear.default, aten.conv2d.default, aten.conv1d.default}


def _through(n: torch.fx.Node) -> list[torch.fx.Node]:
    """Users of n, looking through ops that only move data."""
    from emlkit.passes.activation_alone import PASS_THROUGH

    out, todo = [], list(n.users)
    while todo:
        u = todo.pop()
        if u.op == "call_function" and u.target in PASS_THROUGH:
            todo.extend(u.users)
        else:
            out.append(u)
    return out


def feeds_final_classifier(pool: torch.fx.Node) -> bool:
    """pool -> (view/flatten) -> Linear or conv -> (view) -> graph output: a classifier head."""
    users = _through(pool)
    return bool(users) and all(u.op == "call_function" and u.target in CLASSIFIERS
                               and all(v.op == "output" for v in _through(u)) for u in users)


def candidates(gm: torch.fx.GraphModule) -> list[torch.fx.Node]:
    out = []
    for n in gm.graph.nodes:
        if n.op != "call_function" or not isinstance(n.args[0] if n.args else None, torch.fx.Node):
            continue
        if n.target in SOFTMAX and _shape(n.args[0]) is not None:
            if n.target == aten._softmax.default and n.args[2]:
                continue                         # half_to_float
            out.append(n)
        elif n.target in AVG_POOLS and pool_geometry(n) is not None and feeds_final_classifier(n):
            # Only pools that feed the final classifier: there the coarse shared format costs the most
            # (global_avgpool 39.3 -> 43.5 dB). Lowered everywhere, mobilenet_v3_small fell from 41.2 to
            # 39.6 dB (8 inputs) although each of its ten pools' own output got finer; cause not found.
            out.append(n)
    return out


@declare("quantizer_hook", ("aten.softmax", "aten.avg_pool2d", "aten.mean"), runs_after=("Int8MatmulOnU55",),
         order=160, flows=("cortex_m",))
@dataclass
class OwnOutputQparams(QuantizerHook):
    """Quantizer hook (LowerOptions.quantizer_hooks) for the Cortex-M flow."""

    report_key: str = "own_output_qparams"
    report_name = "annotated"

    def configure(self, quantizer: Any, target: Any) -> Any:
        # OWN_QPARAMS_KEY: the lowering passes take only ops annotated here.
        return annotating_alone(quantizer, candidates, self.done, "ops given their own output qparams",
                                mark=(OWN_QPARAMS_KEY,))
