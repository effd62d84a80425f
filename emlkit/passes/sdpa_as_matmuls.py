"""scaled_dot_product_attention as matmuls and a softmax, its constant mask applied by slicing (before
quantization, Cortex-M).

Matches, in the exported float graph: `aten.scaled_dot_product_attention` (F.scaled_dot_product_attention, and
nn.MultiheadAttention / nn.TransformerEncoderLayer / nn.TransformerDecoderLayer, which call it once the export
turns their fused fast path off) without dropout, with q, k, v of equal rank and head count, and a mask that is
absent, `is_causal`, computed from constants only (a bool or a float mask made in forward(), such as a
key padding mask or `generate_square_subsequent_mask`), computed from the inputs, or both (below).

Produces, for each run of consecutive query rows whose mask rows are equal, `softmax((q_rows @ k_kept^T) * scale
[+ bias]) @ v_kept`, the rows' results concatenated back: k_kept and v_kept are the keys a row attends to
(slices, concatenated when they are not one range), and the bias is the mask's finite values when any is not 0.
Masked-out keys (False, or -inf) are left out of the softmax, which is what the -inf they stand for does.

Why: ExecuTorch 1.5.1's Cortex-M quantizer does not annotate scaled_dot_product_attention and to_edge decomposes
it afterwards into float mul/full/softmax/bmm ops (a float island). As explicit matmuls and a softmax (the zoo's
transformer_block) it lowers to int8 bmm, softmax and tables. A mask cannot be written as an int8 add or fill:
-inf (or the -1e9 users write) would set the scores' quantization range, and a clipped fill leaks probability
into masked keys; leaving the masked keys out is exact.

A mask computed from the model's inputs (`key_padding_mask = tokens == PAD`: in the graph a bool, or the float mask
`masked_fill(zeros, bool, -inf)` nn.MultiheadAttention makes of it, through views and expands) cannot be sliced
away: the scores go through `emlkit_float::masked_softmax(scores, dropped, -1)` instead of the softmax (a bool
attention mask, True = attend, as the inverted comparison that made it: `gt` -> `le`, exact on int8 codes),
which emlkit_softmax.py lowers to the int8 `emlkit::masked_softmax`. The mask stays a view of the bool it came
from ([B, S] seen as [B, 1, 1, S]), broadcast by the kernel, not copied per head and query row; the scores are
seen as [*batch, L, S] for it. A bool that is the `~` (bitwise or logical not) of such a comparison is the
comparison's True left out as it is.

A constant mask joined with one from the inputs (`const + input` of 0 / -inf masks: what nn.MultiheadAttention
makes of attn_mask and key_padding_mask, so nn.TransformerDecoderLayer's causal tgt_mask with
tgt_key_padding_mask = tokens == PAD; or `const & input` of bools, True attends) goes the same way, the masked
softmax reading `logical_or(input's left-out bool [B, 1, 1, S], constant's left-out keys [L, S])` ([B, 1, L, S],
exact on bools: no new kernel, and the constant's keys are not sliced away per query row). The constant must be
the same for every batch entry and head, 0 / -inf only (a finite bias is not a mask the int8 softmax can take) and
leave every query row a key. Other input-dependent masks (finite float values, a bool not made by a comparison
with a number, two masks from the inputs, a layout no view gives) keep the op (refused by name without
--allow-float).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import torch

from emlkit.passes.graph import (FLOAT_MASKED_SOFTMAX, NodeRewrite, constant_values, copy_meta, drop_constant_remains,
                                 node_arg, node_val, unique_name)
from emlkit.passes.manager import declare

aten = torch.ops.aten
# Ops between the model's mask and the attention that only give it another shape (replayed on the bool).
_MASK_SHAPING = {aten.view.default: "view", aten.reshape.default: "reshape", aten._unsafe_view.default: "view",
                 aten.expand.default: "expand", aten.unsqueeze.default: "unsqueeze"}
# A comparison with a number and the one that is true exactly where it is false (no NaN: these run on codes).
_INVERSE = {aten.gt.Scalar: aten.le.Scalar, aten.le.Scalar: aten.gt.Scalar, aten.ge.Scalar: aten.lt.Scalar,
            aten.lt.Scalar: aten.ge.Scalar, aten.eq.Scalar: aten.ne.Scalar, aten.ne.Scalar: aten.eq.Scalar}
_ZEROS = {aten.zeros_like.default, aten.zeros.default, aten.new_zeros.default}
_MASKED_FILL = {aten.masked_fill.Scalar, aten.masked_fill_.Scalar}
_NOT = {aten.bitwise_not.default, aten.logical_not.default}
# How a constant mask meets one from the inputs: the sum of two 0 / -inf masks, the AND of two bool ones.
_COMBINE = {aten.add.Tensor, aten.__and__.Tensor, aten.bitwise_and.Tensor, aten.logical_and.default}


def _shaping_chain(mask: torch.fx.Node) -> tuple[torch.fx.Node, list[torch.fx.Node]]:
    """The node the mask's value comes from through shape-only ops, and those ops (source first)."""
    chain = []
    while mask.op == "call_function" and mask.target in _MASK_SHAPING and isinstance(mask.args[0], torch.fx.Node):
        chain.append(mask)
        mask = mask.args[0]
    return mask, chain[::-1]


def _replay(chain: list[torch.fx.Node], x: torch.Tensor) -> torch.Tensor:
    """The shape-only ops of `chain` applied to x (a tensor of the source's shape)."""
    for c in chain:
        x = getattr(x, _MASK_SHAPING[c.target])(*c.args[1:])
    return x


def _broadcast_view(replay: Callable[[torch.Tensor], torch.Tensor], source: torch.Size,
                    full: list[int]) -> list[int] | None:
    """A shape V with source.numel() elements such that the source, reshaped to V and broadcast to `full`, is the
    mask `replay` makes of it broadcast to `full` (element by element); None when there is none (a permutation)."""
    n = int(torch.Size(source).numel())
    try:
        idx = replay(torch.arange(n).reshape(source)).expand(full)
    except RuntimeError:
        return None
    view = [size if size > 1 and bool((idx.select(d, 1) != idx.select(d, 0)).any()) else 1
            for d, size in enumerate(full)]
    if math.prod(view) != n or not torch.equal(torch.arange(n).reshape(view).expand(full), idx):
        return None
    return view


def _is_compare(node: torch.fx.Node) -> bool:
    """A comparison of a tensor with a number (whose inverse _INVERSE writes)."""
    return node.target in _INVERSE and isinstance(node.args[0], torch.fx.Node) \
        and isinstance(node.args[1], (int, float)) and not isinstance(node.args[1], bool)


@dataclass
class _Dropped:
    """A mask from the inputs as the bool that leaves keys out (True: left out): `source` itself, or its inverse
    comparison `flip` (emitted) when `source` is the comparison that says which keys are attended; `replay` maps a
    tensor of the source's shape to the mask's layout; `dead`: the nodes that made the mask (users first)."""
    source: torch.fx.Node
    flip: Any
    replay: Callable[[torch.Tensor], torch.Tensor]
    dead: list[torch.fx.Node]
    is_float: bool          # the mask was a float 0 / -inf one (else a bool, True attends)
    with_constant: bool = False   # combined with a constant mask (whose nodes go once unread)


def _input_dropped(mask: torch.fx.Node) -> _Dropped | None:
    """The mask from the inputs this pass takes: a comparison with a number (True attends), the bitwise/logical
    not of one, or masked_fill(zeros, bool, -inf), each through shape-only ops; None for any other."""
    source, chain = _shaping_chain(mask)
    sv = node_val(source)
    if sv is None:
        return None
    if sv.dtype == torch.bool and source.target in _NOT and isinstance(source.args[0], torch.fx.Node):
        inner, inner_chain = _shaping_chain(source.args[0])   # ~(x == PAD): the comparison is what is left out
        if not _is_compare(inner):
            return None
        steps = inner_chain + chain
        return _Dropped(inner, None, lambda x: _replay(steps, x), [*chain[::-1], source, *inner_chain[::-1]], False)
    if sv.dtype == torch.bool:
        if not _is_compare(source):
            return None      # True attends: only a comparison whose inverse can be written
        return _Dropped(source, _INVERSE[source.target], lambda x: _replay(chain, x), [*chain[::-1], source], False)
    if sv.dtype.is_floating_point and source.target in _MASKED_FILL and len(source.args) == 3 \
            and source.args[2] == float("-inf") and isinstance(source.args[0], torch.fx.Node) \
            and source.args[0].target in _ZEROS and isinstance(source.args[1], torch.fx.Node):
        bv = node_val(source.args[1])
        if bv is None or bv.shape != sv.shape:
            return None
        return _Dropped(source.args[1], None, lambda x: _replay(chain, x), [*chain[::-1], source, source.args[0]],
                        True)   # 0 where kept, -inf where left out
    return None


def _constant_dropped(c: Any, is_float: bool) -> torch.Tensor | None:
    """The keys a constant mask leaves out (True), or None when it is not a pure mask: a bool (True attends) or a
    float of 0 and -inf only (a finite bias could not go into the int8 softmax)."""
    if not isinstance(c, torch.Tensor):
        return None
    if not is_float:
        return ~c if c.dtype == torch.bool else None
    if not c.dtype.is_floating_point or not bool(((c == 0) | (c == float("-inf"))).all()):
        return None
    return c == float("-inf")


def _combined(mask: torch.fx.Node, env: dict[torch.fx.Node, Any]) -> tuple[_Dropped, torch.Tensor] | None:
    """A constant mask combined with one from the inputs, `const + input` (float 0 / -inf: what
    nn.MultiheadAttention makes of attn_mask and key_padding_mask) or `const & input` (bool), through shape-only
    ops: the input part and the constant's left-out keys in the combination's layout; None for anything else."""
    top, chain = _shaping_chain(mask)
    tv = node_val(top)
    if tv is None or top.target not in _COMBINE or len(top.args) != 2 or top.kwargs:
        return None
    a, b = top.args
    const, other = (a, b) if a in env else (b, a)
    if const not in env or not isinstance(other, torch.fx.Node) or other in env:
        return None
    part = _input_dropped(other)
    is_float = top.target is aten.add.Tensor
    dropped = _constant_dropped(env[const], is_float)
    if part is None or part.is_float != is_float or dropped is None:
        return None
    shape = [int(d) for d in tv.shape]
    inner = part.replay
    part.replay = lambda x: _replay(chain, inner(x).expand(shape))
    part.dead = [*chain[::-1], top, *part.dead]
    part.with_constant = True
    try:
        return part, _replay(chain, dropped.expand(shape))
    except RuntimeError:
        return None


def _runs(keep: torch.Tensor) -> list[tuple[int, int]]:
    """Consecutive query rows with equal mask rows, as (start, end) row ranges."""
    runs, start = [], 0
    for i in range(1, keep.shape[0] + 1):
        if i == keep.shape[0] or not torch.equal(keep[i], keep[start]):
            runs.append((start, i))
            start = i
    return runs


def _key_ranges(keep_row: torch.Tensor) -> list[tuple[int, int]]:
    """The kept keys of one mask row as ranges of consecutive indices."""
    idx = [int(i) for i in torch.nonzero(keep_row).flatten()]
    ranges: list[tuple[int, int]] = []
    for i in idx:
        if ranges and ranges[-1][1] == i:
            ranges[-1] = (ranges[-1][0], i + 1)
        else:
            ranges.append((i, i + 1))
    return ranges


class _Emitter:
    """Inserts calls before a node, each with a meta value computed from zero tensors of its inputs' shapes
    (under the graph's fake mode when it has one), and keeps the list of nodes made."""

    def __init__(self, gm: torch.fx.GraphModule, before: torch.fx.Node, fake_mode: Any) -> None:
        self.gm, self.before, self.fake_mode = gm, before, fake_mode
        self.made: list[torch.fx.Node] = []
        self.real: dict[torch.fx.Node, torch.Tensor] = {}

    def _example(self, a: torch.fx.Node) -> torch.Tensor:
        if a in self.real:
            return self.real[a]
        v = node_val(a)
        assert v is not None
        return torch.zeros([int(d) for d in v.shape], dtype=v.dtype)

    def call(self, target: Any, *args: Any) -> torch.fx.Node:
        with self.gm.graph.inserting_before(self.before):
            node = self.gm.graph.call_function(target, args)
        with torch.no_grad():
            out = target(*torch.fx.node.map_arg(args, self._example))
        self.real[node] = out
        node.meta["val"] = self.fake_mode.from_tensor(out) if self.fake_mode is not None else out
        self.made.append(node)
        return node

    def constant(self, stem: str, value: torch.Tensor) -> torch.fx.Node:
        name = unique_name(self.gm, stem)
        self.gm.register_parameter(name, torch.nn.Parameter(value, requires_grad=False))
        with self.gm.graph.inserting_before(self.before):
            node = self.gm.graph.get_attr(name)
        self.real[node] = value
        node.meta["val"] = self.fake_mode.from_tensor(value) if self.fake_mode is not None else value
        return node


@declare("pre_quant", ("aten.scaled_dot_product_attention",), runs_after=("FoldLinearBatchNorm",),
         runs_before=("SplitAsSlices", "LinearToConv"), order=35, flows=("cortex_m",))
class SdpaAsMatmuls(NodeRewrite):
    matches = (aten.scaled_dot_product_attention.default,)
    what = "scaled_dot_product_attention as matmuls and a softmax"

    def rewrite_node(self, gm: torch.fx.GraphModule, n: torch.fx.Node) -> bool:
        q, k, v = n.args[:3]
        qv, kv, vv = node_val(q), node_val(k), node_val(v)
        mask = node_arg(n, 3, "attn_mask")
        dropout = node_arg(n, 4, "dropout_p", 0.0)
        causal = bool(node_arg(n, 5, "is_causal", False))
        scale = node_arg(n, 6, "scale")
        if qv is None or kv is None or vv is None or dropout or node_arg(n, 7, "enable_gqa", False):
            return False
        if not (qv.dim() == kv.dim() == vv.dim() >= 3) or not qv.shape[:-2] == kv.shape[:-2] == vv.shape[:-2]:
            return False
        rows, keys = int(qv.shape[-2]), int(kv.shape[-2])
        env = constant_values(gm, n) if isinstance(mask, torch.fx.Node) else {}
        keep, bias = self._mask(mask, env, causal, rows, keys, qv.shape[:-2])
        scale = 1.0 / math.sqrt(int(qv.shape[-1])) if scale is None else float(scale)
        if keep is None and isinstance(mask, torch.fx.Node) and not causal and mask not in env:
            return self._input_masked(gm, n, mask, scale, env)
        if keep is None or not bool(keep.any(dim=-1).all()):
            return False  # a mask this cannot take, or a row that attends to nothing (NaN in torch)
        em = _Emitter(gm, n, getattr(qv, "fake_mode", None))
        if qv.dim() != 3:
            # 3-D: a 4-D score tensor gets a channels-last copy (ChannelsLastEverywhere) that the mask's add
            # would then meet in another dim order than its bias (the kernels take one order)
            q, k, v = (em.call(aten.reshape.default, t, [-1, *[int(d) for d in tv.shape[-2:]]])
                       for t, tv in ((q, qv), (k, kv), (v, vv)))
        last = 1
        outs = []
        for r0, r1 in _runs(keep):
            qr = q if (r0, r1) == (0, rows) else em.call(aten.slice.Tensor, q, last, r0, r1)
            ranges = _key_ranges(keep[r0])
            kr, vr = self._keys(em, k, ranges, keys, last), self._keys(em, v, ranges, keys, last)
            s = em.call(aten.matmul.default, qr, em.call(aten.transpose.int, kr, -2, -1))
            s = em.call(aten.mul.Tensor, s, scale)
            if bias is not None:
                cols = torch.cat([bias[r0:r1, a:b] for a, b in ranges], dim=-1)
                if bool((cols != 0).any()):
                    # full shape: the Cortex-M quantizer annotates an add only without broadcasting
                    full = cols.to(qv.dtype).expand(*em.real[s].shape).contiguous()
                    s = em.call(aten.add.Tensor, s, em.constant("_sdpa_mask_bias", full))
            outs.append(em.call(aten.matmul.default, em.call(aten.softmax.int, s, -1), vr))
        out = outs[0] if len(outs) == 1 else em.call(aten.cat.default, outs, last)
        if qv.dim() != 3:
            out = em.call(aten.reshape.default, out, [*[int(d) for d in qv.shape[:-1]], int(vv.shape[-1])])
        copy_meta(n, em.made)
        n.replace_all_uses_with(out)
        gm.graph.erase_node(n)
        if env:
            drop_constant_remains(gm, env)
        return True

    def _input_masked(self, gm: torch.fx.GraphModule, n: torch.fx.Node, mask: torch.fx.Node, scale: float,
                      env: dict[torch.fx.Node, Any]) -> bool:
        """The attention with a mask computed from the inputs (alone, or combined with a constant one):
        bmm -> emlkit_float::masked_softmax -> bmm."""
        q, k, v = n.args[:3]
        qv, kv, vv = node_val(q), node_val(k), node_val(v)
        assert qv is not None and kv is not None and vv is not None
        batch = [int(d) for d in qv.shape[:-2]]
        rows, keys = int(qv.shape[-2]), int(kv.shape[-2])
        found = self._mask_parts(mask, env, [*batch, rows, keys])
        if found is None:
            return False
        part, source_shape, view, table = found
        em = _Emitter(gm, n, getattr(qv, "fake_mode", None))
        dropped = part.source if part.flip is None else em.call(part.flip, *part.source.args[:2])
        if list(source_shape) != view:
            dropped = em.call(aten.view.default, dropped, view)
        if table is not None:
            # the constant's left-out keys [rows, keys] with the input's [B, 1, 1, keys]: one bool per key and row
            dropped = em.call(aten.logical_or.default, dropped, em.constant("_sdpa_mask_dropped", table))
        if qv.dim() != 3:
            q, k, v = (em.call(aten.reshape.default, t, [-1, *[int(d) for d in tv.shape[-2:]]])
                       for t, tv in ((q, qv), (k, kv), (v, vv)))
        s = em.call(aten.matmul.default, q, em.call(aten.transpose.int, k, -2, -1))
        s = em.call(aten.mul.Tensor, s, scale)
        if qv.dim() != 3:
            s = em.call(aten.reshape.default, s, [*batch, rows, keys])
        p = em.call(FLOAT_MASKED_SOFTMAX, s, dropped, -1)
        if qv.dim() != 3:
            p = em.call(aten.reshape.default, p, [-1, rows, keys])
        out = em.call(aten.matmul.default, p, v)
        if qv.dim() != 3:
            out = em.call(aten.reshape.default, out, [*[int(d) for d in qv.shape[:-1]], int(vv.shape[-1])])
        copy_meta(n, em.made)
        n.replace_all_uses_with(out)
        gm.graph.erase_node(n)
        for dead in part.dead:
            if not dead.users:
                gm.graph.erase_node(dead)    # the float mask and its shaping (masked_fill_ is not dead code)
        if part.with_constant:
            drop_constant_remains(gm, env)
        return True

    @staticmethod
    def _mask_parts(mask: torch.fx.Node, env: dict[torch.fx.Node, Any],
                    full: list[int]) -> tuple[_Dropped, list[int], list[int], torch.Tensor | None] | None:
        """(the mask from the inputs, its bool's shape, the view of that bool that broadcasts to `full` = [*batch,
        rows, keys], the [rows, keys] keys a constant mask combined with it leaves out or None), or None when this
        cannot take the mask."""
        combined = _combined(mask, env)
        part, const = combined if combined is not None else (_input_dropped(mask), None)
        sv = None if part is None else node_val(part.source)
        if part is None or sv is None:
            return None
        shape = [int(d) for d in sv.shape]
        view = _broadcast_view(part.replay, torch.Size(shape), full)
        if view is None:
            return None
        if const is None:
            return part, shape, view, None
        try:
            c = const.expand(full).reshape(-1, *full[-2:])
        except RuntimeError:
            return None
        if not bool((c == c[0]).all()) or bool(c[0].all(dim=-1).any()):
            return None  # a constant per batch entry or head, or a query row it leaves nothing (NaN in torch)
        return part, shape, view, c[0] if bool(c[0].any()) else None

    @staticmethod
    def _keys(em: _Emitter, x: torch.fx.Node, ranges: list[tuple[int, int]], keys: int, dim: int) -> torch.fx.Node:
        if ranges == [(0, keys)]:
            return x
        parts = [em.call(aten.slice.Tensor, x, dim, a, b) for a, b in ranges]
        return parts[0] if len(parts) == 1 else em.call(aten.cat.default, parts, dim)

    @staticmethod
    def _mask(mask: Any, env: dict[torch.fx.Node, Any], causal: bool, rows: int, keys: int,
              batch: torch.Size) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """(keep, bias) over [rows, keys]: which keys each query row attends to and the finite additive mask
        (None: no additive part); keep is None when the mask is not a constant the same for every batch entry
        and head."""
        keep = torch.ones(rows, keys, dtype=torch.bool)
        if causal:
            keep = keep.tril()
        if mask is None:
            return keep, None
        m = env.get(mask) if isinstance(mask, torch.fx.Node) else None
        if not isinstance(m, torch.Tensor):
            return None, None
        try:
            m = m.expand(*batch, rows, keys).reshape(-1, rows, keys)
        except RuntimeError:
            return None, None
        if not bool((m == m[0]).all()):
            return None, None  # a mask per batch entry or head: one graph per entry is not worth it
        m = m[0]
        if m.dtype == torch.bool:
            return keep & m, None
        finite = torch.isfinite(m)
        if bool((~finite & (m > 0)).any()) or bool(torch.isnan(m).any()):
            return None, None
        return keep & finite, torch.where(finite, m, torch.zeros_like(m)).to(torch.float32)
