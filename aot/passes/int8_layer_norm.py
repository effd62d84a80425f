"""Quantized layer norm as `emlkit::quantized_layer_norm` in the final Cortex-M program.

Matches, in the lowered ExportedProgram, `cortex_m::dequantize_per_tensor(x) ->
aten::native_layer_norm(., [N], gamma, beta, eps) -> getitem 0 -> cortex_m::quantize_per_tensor`
with int8 codes in and out, normalisation over the last dim only and constant
gamma/beta (elementwise affine) that nothing else reads.

Produces `emlkit::quantized_layer_norm(x, gain, bias, eps_term, shift, out_zp)` (aot/emlkit_ops.py
says what it computes): gamma and beta become int32 gain/bias in units of the output scale
times 2^shift (shift as large as keeps every |gain|, |bias| under 2^30), and
eps_term = max(1, round(N^2 * eps / scale_in^2)) carries eps in the squared-code units of
the row statistics (the input zero point cancels out of mean and variance).

Why: ExecuTorch 1.5.1's Cortex-M flow has no layer norm; the quantizer left it as a float
island (refused), and a float kernel would not be bit-exact between the host and a device
without an FPU. The integer op is exact everywhere (firmware/ops/emlkit_ops.c).

Runs on the ExportedProgram (it owns the constants) after CortexMPassManager.
"""

from __future__ import annotations

import operator
from typing import Any

import torch
from executorch.backends.transforms.utils import get_param_tensor, is_param_node
from executorch.exir.dialects._ops import ops as exir_ops

import aot.emlkit_ops  # noqa: F401  (defines emlkit::quantized_layer_norm)
from aot.passes.manager import declare

MAX_SHIFT = 30


def _only_user(n: torch.fx.Node) -> torch.fx.Node | None:
    return next(iter(n.users)) if len(n.users) == 1 else None


def _set_constant(ep: Any, node: torch.fx.Node, data: torch.Tensor) -> bool:
    """Replace a parameter/buffer/constant node's tensor (an int32 tensor cannot be a grad-requiring Parameter)."""
    sig = ep.graph_signature
    if node.name in sig.inputs_to_parameters:
        ep.state_dict[sig.inputs_to_parameters[node.name]] = torch.nn.Parameter(data, requires_grad=False)
    elif node.name in sig.inputs_to_buffers:
        target = sig.inputs_to_buffers[node.name]
        if target in sig.non_persistent_buffers:
            ep.constants[target] = data
        else:
            ep.state_dict[target] = data
    elif node.name in sig.inputs_to_lifted_tensor_constants:
        ep.constants[sig.inputs_to_lifted_tensor_constants[node.name]] = data
    else:
        return False
    val = node.meta.get("val")
    if isinstance(val, torch.Tensor):
        node.meta["val"] = val.to(data.dtype)
    return True


def integer_params(gamma: torch.Tensor, beta: torch.Tensor, eps: float, n: int, scale_in: float,
                   scale_out: float) -> tuple[torch.Tensor, torch.Tensor, int, int] | None:
    """(gain, bias, eps_term, shift), or None when gamma/beta are too large for the int32 form."""
    g, b = gamma.double() / scale_out, beta.double() / scale_out
    top = float(max(g.abs().max(), b.abs().max()))
    shift = MAX_SHIFT - max(0, int(top).bit_length())
    if shift < 0:
        return None
    gain = torch.round(g * (1 << shift)).to(torch.int32)
    bias = torch.round(b * (1 << shift)).to(torch.int32)
    eps_term = max(1, round(n * n * eps / (scale_in * scale_in)))
    return gain, bias, eps_term, shift


@declare("program", ("aten.native_layer_norm",))
class Int8LayerNorm:
    report_key = "int8_layer_norm"

    def __init__(self) -> None:
        self.replaced: list[str] = []
        self.skipped: list[str] = []

    def report(self) -> dict[str, Any]:
        return {"replaced": list(self.replaced), "skipped": list(self.skipped)}

    def _match(self, ep: Any, ln: torch.fx.Node) -> tuple[Any, ...] | str:
        cm = exir_ops.edge.cortex_m
        args = list(ln.args) + [None] * (5 - len(ln.args))
        dq, shape, w, b, eps = args[:5]
        if not isinstance(dq, torch.fx.Node) or dq.target is not cm.dequantize_per_tensor.default:
            return "input is not dequantized int8"
        if len(shape) != 1:
            return "normalises over more than the last dim"
        if not (isinstance(w, torch.fx.Node) and isinstance(b, torch.fx.Node) and is_param_node(ep, w)
                and is_param_node(ep, b) and len(w.users) == 1 and len(b.users) == 1):
            return "no constant gamma/beta of its own"
        getitems = [u for u in ln.users if u.target is operator.getitem]
        if len(getitems) != len(ln.users) or any(u.args[1] != 0 for u in getitems) or len(getitems) != 1:
            return "mean/rstd outputs are used"
        q = _only_user(getitems[0])
        if q is None or q.target is not cm.quantize_per_tensor.default:
            return "output is not quantized"
        xq = dq.args[0]
        xv, qv = xq.meta.get("val"), q.meta.get("val")
        if not isinstance(xv, torch.Tensor) or xv.dtype != torch.int8 or q.args[5] != torch.int8 or \
                not xv.is_contiguous() or int(shape[0]) != xv.shape[-1] or not isinstance(qv, torch.Tensor):
            return "not int8 contiguous codes in and out"
        gamma, beta = get_param_tensor(ep, w), get_param_tensor(ep, b)
        if gamma is None or beta is None:
            return "gamma/beta not found"
        ip = integer_params(gamma, beta, float(eps if eps is not None else 1e-5), int(shape[0]), float(dq.args[1]),
                            float(q.args[1]))
        if ip is None:
            return "gamma/beta too large for int32 in units of the output scale"
        return dq, xq, w, b, getitems[0], q, ip

    def __call__(self, ep: Any) -> Any:
        self.replaced, self.skipped = [], []
        g = ep.graph_module.graph
        for ln in list(g.nodes):
            if ln.op != "call_function" or ln.target is not exir_ops.edge.aten.native_layer_norm.default:
                continue
            m = self._match(ep, ln)
            if isinstance(m, str):
                self.skipped.append(f"{ln.name}: {m}")
                continue
            dq, xq, w, b, item, q, (gain, bias, eps_term, shift) = m
            _set_constant(ep, w, gain)
            _set_constant(ep, b, bias)
            with g.inserting_before(q):
                new = g.call_function(exir_ops.edge.emlkit.quantized_layer_norm.default,
                                      (xq, w, b, eps_term, shift, int(q.args[2])))
            new.meta.update(q.meta)
            new.meta["val"] = q.meta["val"]
            for k in ("stack_trace", "nn_module_stack", "from_node", "source_fn_stack"):
                if k in ln.meta:
                    new.meta[k] = ln.meta[k]
            q.replace_all_uses_with(new)
            for dead in (q, item, ln):
                g.erase_node(dead)
            if not dq.users:
                g.erase_node(dq)
            self.replaced.append(new.name)
        if self.replaced:
            g.lint()
            ep.graph_module.recompile()
        return ep
