"""Quantized layer norm as `emlkit::quantized_layer_norm` in the final Cortex-M program.

Matches, in the lowered ExportedProgram, `cortex_m::dequantize_per_tensor(x) ->
aten::native_layer_norm(., [N], gamma, beta, eps) -> getitem 0 -> cortex_m::quantize_per_tensor`
with int8 codes in and out, constant gamma/beta that nothing else reads (or none:
`elementwise_affine=False` or `bias=False` get gamma 1 and beta 0 as new constants), and normalised dims that are the input's innermost in memory: the last
dim, the last k of a contiguous tensor (LayerNorm over [T, C]), or C, H and W of a
channels-last map (LayerNorm over [C, H, W]). Other normalised dims (H and W of a
channels-last map) get a copy of the input in NCHW order first. The op writes in
its input's dim order; a copy back to the order ExecuTorch gave the output is
dropped when it only fed a copy to the op's order, else added.

Produces `emlkit::quantized_layer_norm(x, gain, bias, eps_term, shift, out_zp)` (emlkit/emlkit_ops.py
says what it computes): gamma and beta become int32 gain/bias in units of the output scale
times 2^shift (shift as large as keeps every |gain|, |bias| under 2^30), flattened in the
input's memory order (the op normalises rows of numel(gain) consecutive codes), and
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
from executorch.backends.transforms.utils import create_constant_placeholder, get_param_tensor, is_param_node
from executorch.exir.dialects._ops import ops as exir_ops
from torch.export.graph_signature import InputKind

import emlkit.emlkit_ops  # noqa: F401  (defines emlkit::quantized_layer_norm)
from emlkit.passes.graph import move_onto_codes
from emlkit.passes.manager import Pass, declare

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
    mode = getattr(val, "fake_mode", None)
    if mode is not None:
        node.meta["val"] = mode.from_tensor(data, static_shapes=True)
    elif isinstance(val, torch.Tensor):
        node.meta["val"] = data
    return True


def _constant(ep: Any, ln: torch.fx.Node, node: torch.fx.Node | None, data: torch.Tensor,
              what: str) -> torch.fx.Node:
    """NODE's constant replaced by DATA, or a new lifted constant holding DATA when the layer norm had none."""
    if node is not None:
        _set_constant(ep, node, data)
        return node
    g = ep.graph_module.graph
    first_input = next(n for n in g.nodes if n.op == "placeholder" and n.name in ep.graph_signature.user_inputs)
    with g.inserting_before(first_input):
        return create_constant_placeholder(ep, g, f"{ln.name}_{what}", InputKind.CONSTANT_TENSOR, data)


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


def in_dim_order(t: torch.Tensor, order: list[int]) -> torch.Tensor:
    """T's values laid out in dim order ORDER (a fake tensor stays fake)."""
    back = [order.index(d) for d in range(t.dim())]
    return t.permute(order).contiguous().permute(back)


@declare("program", ("aten.native_layer_norm",), order=280, flows=("cortex_m",))
class Int8LayerNorm(Pass):
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
        for t in (w, b):   # None: LayerNorm(elementwise_affine=False) or bias=False (gamma 1, beta 0)
            if t is not None and not (isinstance(t, torch.fx.Node) and is_param_node(ep, t) and len(t.users) == 1):
                return "gamma/beta are not constants of its own"
        getitems = [u for u in ln.users if u.target is operator.getitem]
        if len(getitems) != len(ln.users) or any(u.args[1] != 0 for u in getitems) or len(getitems) != 1:
            return "mean/rstd outputs are used"
        q = _only_user(getitems[0])
        if q is None or q.target is not cm.quantize_per_tensor.default:
            return "output is not quantized"
        xq = dq.args[0]
        xv, qv = xq.meta.get("val"), q.meta.get("val")
        if not isinstance(xv, torch.Tensor) or xv.dtype != torch.int8 or q.args[5] != torch.int8 or \
                not isinstance(qv, torch.Tensor):
            return "not int8 codes in and out"
        k, d = len(shape), xv.dim()
        if k == 0 or k > d or list(xv.shape[d - k:]) != list(shape):
            return f"normalized_shape {list(shape)} is not the trailing sizes of a {list(xv.shape)} input"
        inner = list(xv.dim_order())[d - k:]      # the k innermost dims in memory
        to_contiguous = sorted(inner) != list(range(d - k, d))
        if to_contiguous:                         # e.g. over H, W of a channels-last map: copy to NCHW first
            inner = list(range(d - k, d))
        gamma = torch.ones(list(shape)) if w is None else get_param_tensor(ep, w)
        beta = torch.zeros(list(shape)) if b is None else get_param_tensor(ep, b)
        if gamma is None or beta is None:
            return "gamma/beta not found"
        mem = [i - (d - k) for i in inner]        # gamma/beta in the input's memory order
        gamma, beta = gamma.permute(mem).flatten(), beta.permute(mem).flatten()
        ip = integer_params(gamma, beta, float(eps if eps is not None else 1e-5), gamma.numel(), float(dq.args[1]),
                            float(q.args[1]))
        if ip is None:
            return "gamma/beta too large for int32 in units of the output scale"
        return dq, xq, w, b, getitems[0], q, ip, to_contiguous

    @staticmethod
    def _rewire(g: torch.fx.Graph, q: torch.fx.Node, new: torch.fx.Node, xorder: list[int]) -> None:
        """Give q's users NEW's output. ExecuTorch writes a layer norm's output contiguous and copies it
        to channels-last for the next conv: such copies to NEW's own order are dropped; anyone else that
        read q's order gets one copy back to it."""
        clone = exir_ops.edge.dim_order_ops._clone_dim_order.default
        qorder = list(q.meta["val"].dim_order())
        if qorder == xorder:
            q.replace_all_uses_with(new)
            return
        for u in list(q.users):
            if u.target is clone and list(u.kwargs.get("dim_order") or []) == xorder:
                u.replace_all_uses_with(new)
                g.erase_node(u)
        if q.users:
            with g.inserting_after(new):
                back = g.call_function(clone, (new,), {"dim_order": qorder})
            back.meta.update(q.meta)
            q.replace_all_uses_with(back)

    @staticmethod
    def _codes_before_copies(g: torch.fx.Graph, ln: torch.fx.Node) -> None:
        """Move copies and views between LN's dequantize and LN onto the int8 side (they move values without
        changing them), so LN reads the dequantize itself: a GroupNorm after a channels-last map reaches its layer
        norm through a copy to NCHW and a view to (N, G, C/G*H*W)."""
        cm = exir_ops.edge.cortex_m
        moves = (exir_ops.edge.dim_order_ops._clone_dim_order.default, exir_ops.edge.aten.view_copy.default)
        chain, x = [], ln.args[0]
        while isinstance(x, torch.fx.Node) and x.target in moves and len(x.users) == 1:
            chain.append(x)
            x = x.args[0]
        if not chain or not isinstance(x, torch.fx.Node) or x.target is not cm.dequantize_per_tensor.default \
                or len(x.users) != 1 or not isinstance(x.args[0].meta.get("val"), torch.Tensor):
            return
        move_onto_codes(g, chain, x, x.args[0].meta["val"].dtype)

    def reset(self) -> None:
        self.replaced, self.skipped = [], []

    def work(self, ep: Any) -> Any:
        g = ep.graph_module.graph
        for ln in list(g.nodes):
            if ln.op != "call_function" or ln.target is not exir_ops.edge.aten.native_layer_norm.default:
                continue
            self._codes_before_copies(g, ln)
            m = self._match(ep, ln)
            if isinstance(m, str):
                self.skipped.append(f"{ln.name}: {m}")
                continue
            dq, xq, w, b, item, q, (gain, bias, eps_term, shift), to_contiguous = m
            w = _constant(ep, ln, w, gain, "gain")
            b = _constant(ep, ln, b, bias, "bias")
            x_in = xq
            with g.inserting_before(q):
                if to_contiguous:
                    order = list(range(xq.meta["val"].dim()))
                    x_in = g.call_function(exir_ops.edge.dim_order_ops._clone_dim_order.default, (xq,),
                                           {"dim_order": order})
                    x_in.meta.update(xq.meta)
                    x_in.meta["val"] = in_dim_order(xq.meta["val"], order)
                new = g.call_function(exir_ops.edge.emlkit.quantized_layer_norm.default,
                                      (x_in, w, b, eps_term, shift, int(q.args[2])))
            new.meta.update(q.meta)
            xorder = list(x_in.meta["val"].dim_order())
            new.meta["val"] = in_dim_order(q.meta["val"], xorder)  # the op writes in its input's order
            for k in ("stack_trace", "nn_module_stack", "from_node", "source_fn_stack"):
                if k in ln.meta:
                    new.meta[k] = ln.meta[k]
            self._rewire(g, q, new, xorder)
            for dead in (q, item, ln):
                g.erase_node(dead)
            if not dq.users:
                g.erase_node(dq)
            self.replaced.append(new.name)
        if self.replaced:
            g.lint()
            ep.graph_module.recompile()
        return ep
