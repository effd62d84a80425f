"""Linear layers as 1x1 convolutions, so their weights are quantized per output channel.

Matches, in the exported float graph before quantization annotation,
`aten.linear(x, W, b)` with a constant weight W [N, C] (and constant bias b or
none) and an input x [..., C].

Produces `view(conv2d(view(x, [M, C, 1, 1]), W.view(N, C, 1, 1), b), [..., N])`
with M the product of x's leading dimensions: the same arithmetic (each of the
M rows is one 1x1 "pixel" batch entry), but the Cortex-M quantizer gives conv
weights one scale per output channel and `cortex_m::quantized_conv2d` applies
per-channel requantization, whereas `cortex_m::quantized_linear` takes one
multiplier for the whole layer. Layers whose output channels have uneven
ranges keep more weight bits this way (see tests/test_robustness.py for SNR).

It also sidesteps an ExecuTorch retrace problem: between FoldAndAnnotateQParams
and AtenToCortexM a quantized `aten.linear` still runs on int8 inputs with an
int32 bias, so fake-tensor type promotion makes its output int32; a consumer
that checks dtypes (`aten.bmm` against an int8 operand, `quantized_activation`)
then fails. `aten.convolution`'s output keeps the input dtype, so it does not.

Which layers (`mode`):
- "all" (default): every layer. The Arm (Ethos-U) quantizer is per-channel for
  Linear too, so this is what keeps CPU accuracy at the NPU's: mlp 36.8 dB with
  "auto" against 39.6 dB with "all" and on ethos-u55-128 (both with
  symmetric_weight_range.py), at 2.8x the instructions of the FC kernel.
- "auto": layers with at least MIN_ROWS rows (there the conv kernel
  costs about what the FC kernel does: fc_autoencoder, 4 rows, +5% instructions
  under QEMU) and layers whose output reaches a matmul or a pointwise op that
  LUT fusion takes (needed for correctness, see above). A batch-1 layer feeding
  another layer keeps the FC kernel: the 1x1 conv costs ~3.3x its instructions.
- "off": none (then linear -> bmm / linear -> LUT fail to lower, as before).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from emlkit.errors import AotError
from emlkit.passes.graph import (BINARY_OPS, FUSABLE_ACTIVATIONS, UNARY_OPS, LinearOperands, LinearRewrite, conv_val,
                                 conv_weight, reaches, replace_linear)
from emlkit.passes.manager import declare

aten = torch.ops.aten

# Rows (product of the leading dims) from which the 1x1 conv is as cheap as the FC kernel.
MIN_ROWS = 4
# Ops that only move data: a consumer behind them still reads the linear's int8 output.
_PASS_THROUGH = {aten.view.default, aten.reshape.default, aten.transpose.int, aten.permute.default,
                 aten.flatten.using_ints, aten.unsqueeze.default, aten.squeeze.dim, aten.squeeze.default,
                 aten.contiguous.default, aten.clone.default, aten.t.default, aten._unsafe_view.default}
_MATMULS = {aten.matmul.default, aten.bmm.default, aten.mm.default}


def _needs_int8_output(n: torch.fx.Node) -> bool:
    """Does the linear's quantized output reach a consumer that rejects the retraced int32 (see above)?"""
    def verdict(u: torch.fx.Node) -> bool | None:
        if u.target in _PASS_THROUGH or u.target in FUSABLE_ACTIVATIONS:
            return None               # fused activations vanish into the layer, their users read it
        if u.target in _MATMULS or u.target in UNARY_OPS:
            return True
        # scalar arithmetic: a LUT candidate
        return u.target in BINARY_OPS and sum(isinstance(a, torch.fx.Node) for a in u.args) == 1

    return reaches(n, verdict)


# The Arm quantizer is per-channel for linear already.
@declare("pre_quant", ("aten.linear",),
         order=60, flows=("cortex_m",))
@dataclass
class LinearToConv(LinearRewrite):
    mode: str = "all"                  # "all", "auto" or "off" (see the module docstring)
    what = "linear -> 1x1 conv"

    @classmethod
    def create(cls, opts: Any, allow_float: bool) -> "LinearToConv":
        return cls(mode=opts.linear_mode)

    def report(self) -> dict[str, Any]:
        return {"mode": self.mode if self.applicable else "off", **super().report()}

    def __call__(self, gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
        if self.mode not in ("auto", "all", "off"):
            raise AotError(f"LinearToConv mode {self.mode!r} is not known: use 'auto', 'all' or 'off'")
        return super().__call__(gm)

    def run(self, gm: torch.fx.GraphModule) -> list[str]:
        return [] if self.mode == "off" else super().run(gm)

    def rewrite_linear(self, gm: torch.fx.GraphModule, n: torch.fx.Node, ops: LinearOperands) -> bool:
        x, w, b_node, xval, lead = ops.x, ops.w, ops.b_node, ops.xval, ops.lead
        cout, cin = w.shape
        rows = math.prod(lead) if lead else 1
        if self.mode == "auto" and rows < MIN_ROWS and not _needs_int8_output(n):
            return False
        w4 = conv_weight(gm, n, ops, "_aot_conv_weight")
        g = gm.graph
        with g.inserting_before(n):
            x4 = g.call_function(aten.view.default, (x, [rows, cin, 1, 1]))
            conv = g.call_function(aten.conv2d.default, (x4, w4, b_node))
            y = g.call_function(aten.view.default, (conv, [*lead, cout]))
        fake_mode = getattr(xval, "fake_mode", None)
        if fake_mode is not None:
            with fake_mode:
                x4.meta["val"] = xval.reshape(rows, cin, 1, 1)
                conv.meta["val"] = conv_val(x4, w4, b_node)
                y.meta["val"] = conv.meta["val"].reshape(*lead, cout)
        replace_linear(n, (w4, x4, conv, y))
        self._hoist_activation(y, conv)
        return True

    @staticmethod
    def _hoist_activation(view: torch.fx.Node, conv: torch.fx.Node) -> None:
        """conv -> view -> relu  becomes  conv -> relu -> view.

        The quantizer fuses an activation into the conv's output bounds only when
        it reads the conv directly; behind the view it would stay a separate op
        (a lookup table on Cortex-M). Pointwise, so the order does not matter.
        """
        users = list(view.users)
        if len(users) != 1 or len(conv.users) != 1:
            return
        act = users[0]
        if act.op != "call_function" or act.target not in FUSABLE_ACTIVATIONS or act.args[0] is not view:
            return
        act.args = (conv, *act.args[1:])
        act.replace_all_uses_with(view, delete_user_cb=lambda u: u is not view)
        view.args = (act, *view.args[1:])
        # Node order must follow data flow: the view now comes after the activation.
        act.append(view)
        if "val" in conv.meta:
            act.meta["val"] = conv.meta["val"]
