"""Quantizer annotation (Cortex-M): softmax, log_softmax and average pools get their own observed output qparams.

Targets, in the graph the quantizer annotates:
- `softmax` / `_softmax`, `log_softmax` / `_log_softmax` and `emlkit_float::masked_softmax` (sdpa_as_matmuls.py's
  attention with a mask from the inputs; its scores input only, not the bool mask) (int8);
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
`emlkit_softmax.py`, `emlkit_log_softmax.py` and `emlkit_avg_pool.py` lower to `emlkit::` ops.
ExecuTorch's quantizer has no pattern for log_softmax at all: without this it stayed a float op.
"""

from __future__ import annotations


import torch

from emlkit.passes.graph import (AVG_POOLS, FLOAT_MASKED_SOFTMAX, LOG_SOFTMAX, MEAN_POOL_KEY, OWN_QPARAMS_KEY,
                                 PASS_THROUGH, SOFTMAX, QuantizerHook, pool_geometry, shape_of)
from emlkit.passes.manager import declare

aten = torch.ops.aten

CLASSIFIERS = {aten.linear.default, aten.conv2d.default, aten.conv1d.default}


def _through(n: torch.fx.Node) -> list[torch.fx.Node]:
    """Users of n, looking through ops that only move data."""
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
        if n.target is FLOAT_MASKED_SOFTMAX and shape_of(n.args[0]) is not None:
            out.append(n)                        # its first input, the scores, is observed; the bool mask is not
        elif n.target in SOFTMAX | LOG_SOFTMAX and shape_of(n.args[0]) is not None:
            if n.target in (aten._softmax.default, aten._log_softmax.default) and n.args[2]:
                continue                         # half_to_float
            out.append(n)
        elif n.target in AVG_POOLS and pool_geometry(n) is not None and (feeds_final_classifier(n)
                                                                          or n.meta.get(MEAN_POOL_KEY)):
            # Only pools that feed the final classifier: there the coarse shared format costs the most
            # (global_avgpool 39.3 -> 43.5 dB). Lowered everywhere, mobilenet_v3_small fell from 41.2 to
            # 39.6 dB (8 inputs) although each of its ten pools' own output got finer; cause not found.
            # A mean (mean_as_pool.py) always: its output range is a fraction of its input's.
            out.append(n)
    return out


@declare("quantizer_hook", ("aten.softmax", "aten.log_softmax", "emlkit_float.masked_softmax", "aten.avg_pool2d",
                           "aten.mean"), runs_after=("Int8MatmulOnU55",),
         order=160, flows=("cortex_m",))
class OwnOutputQparams(QuantizerHook):
    report_name = "annotated"
    alone = candidates
    alone_what = "ops given their own output qparams"
    alone_mark = (OWN_QPARAMS_KEY,)  # the lowering passes take only ops annotated here
