"""sdpa_as_matmuls.py: scaled_dot_product_attention as matmuls and a softmax before quantization (Cortex-M), its
constant mask applied by leaving the masked keys out: the same function, and the program is int8."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from emlkit.passes.sdpa_as_matmuls import SdpaAsMatmuls
from pass_graphs import assert_pipelines, bound, called, graph_of, lowered

aten = torch.ops.aten
SDPA = aten.scaled_dot_product_attention.default


class Attn(torch.nn.Module):
    """SDPA over 2 heads of 6 tokens with the mask KIND, made in forward() from constants."""

    def __init__(self, kind: str) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.kind, self.proj = kind, torch.nn.Linear(16, 48)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.proj(x).reshape(1, 6, 3, 2, 8).permute(2, 0, 3, 1, 4)
        if self.kind == "causal":
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        if self.kind == "bool":  # keys 1 and 4 masked for every query, key 0 also for the last two queries
            m = torch.ones(6, 6, dtype=torch.bool)
            m[:, 1] = False
            m[:, 4] = False
            m[4:, 0] = False
            return F.scaled_dot_product_attention(q, k, v, attn_mask=m)
        if self.kind == "float":  # -inf on the last key, a finite bias elsewhere, scale given
            m = torch.zeros(6, 6)
            m[:, -1] = float("-inf")
            m[:, 2] = -1.5
            return F.scaled_dot_product_attention(q, k, v, attn_mask=m, scale=0.2)
        if self.kind == "padding":  # nn.MultiheadAttention's key_padding_mask, as it builds it
            pad = torch.zeros(1, 6, dtype=torch.bool)
            pad[:, -2:] = True
            m = torch.zeros_like(pad, dtype=torch.float32).masked_fill_(pad, float("-inf")).view(1, 1, 1, 6)
            return F.scaled_dot_product_attention(q, k, v, attn_mask=m)
        return F.scaled_dot_product_attention(q, k, v)


@pytest.mark.parametrize("kind", ["none", "causal", "bool", "float", "padding"])
def test_sdpa_is_its_definition(kind: str) -> None:
    m, x = Attn(kind).eval(), torch.randn(1, 6, 16)
    p = bound(SdpaAsMatmuls(), "cortex-m55")
    gm = p(graph_of(m, x))
    assert len(p.report()["rewritten"]) == 1 and SDPA not in called(gm)
    # the mask's constant ops are gone with it: nothing float is computed from constants alone
    assert not {aten.full.default, aten.zeros.default, aten.ones.default, aten.masked_fill_.Scalar} & set(called(gm))
    with torch.no_grad():
        torch.testing.assert_close(gm(x), m(x), atol=1e-5, rtol=1e-5)


FLOAT_MASKED = torch.ops.emlkit_float.masked_softmax.default
COMPARE = {aten.gt.Scalar, aten.ge.Scalar, aten.lt.Scalar, aten.le.Scalar, aten.eq.Scalar, aten.ne.Scalar}


class _Masked(torch.nn.Module):
    """Attention over 6 tokens of the kind KIND: a projection to q, k, v, a MultiheadAttention and LAYER."""

    def __init__(self, kind: str, layer: type[torch.nn.Module]) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.kind, self.proj = kind, torch.nn.Linear(16, 48)
        self.mha = torch.nn.MultiheadAttention(16, 2, batch_first=True)
        self.layer = layer(16, 2, 32, dropout=0.0, batch_first=True)


class InputMasked(_Masked):
    """A mask computed from the input x (the last feature flags padded tokens, the first one the keys each query
    row may attend to); LAYER: an encoder layer."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind, torch.nn.TransformerEncoderLayer)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pad = x[..., -1] > 0.5                                        # [B, 6], True: left out
        if self.kind == "mha":
            return self.mha(x, x, x, key_padding_mask=pad, need_weights=False)[0]
        if self.kind == "encoder":
            return self.layer(x, src_key_padding_mask=pad)
        q, k, v = self.proj(x).reshape(-1, 6, 3, 2, 8).permute(2, 0, 3, 1, 4)
        if self.kind == "bool_keys":                                  # True attends: [B, 1, 1, 6]
            return F.scaled_dot_product_attention(q, k, v, attn_mask=(x[..., -1] <= 0.5)[:, None, None, :])
        if self.kind == "bool_not":                                   # True attends: ~(padding) [B, 1, 1, 6]
            return F.scaled_dot_product_attention(q, k, v, attn_mask=~pad[:, None, None, :])
        if self.kind == "bool_rows":                                  # one mask row per query: [B, 1, 6, 6]
            keep = (x[..., :6] > -0.5).unsqueeze(1)
            return F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
        if self.kind == "float_3d":                                   # 3-D q/k/v, a float -inf mask [B, 1, 6]
            m = torch.zeros_like(pad, dtype=torch.float32).masked_fill_(pad, float("-inf")).unsqueeze(1)
            return F.scaled_dot_product_attention(q[:, 0], k[:, 0], v[:, 0], attn_mask=m)
        raise ValueError(self.kind)


def _padded(batch: int = 2) -> torch.Tensor:
    x = torch.randn(batch, 6, 16, generator=torch.Generator().manual_seed(3))
    x[..., -1] = 0.0
    x[0, 4:, -1] = 1.0      # entry 0: the last two tokens are padding
    x[-1, 1, -1] = 1.0      # entry 1: token 1
    x[..., 0] = x[..., 0].abs() - 0.4   # bool_rows: key 0 is kept by every row (no row attends to nothing)
    return x


@pytest.mark.parametrize("kind", ["mha", "encoder", "bool_keys", "bool_not", "bool_rows", "float_3d"])
def test_input_dependent_mask_is_its_definition(kind: str) -> None:
    """Rewritten into the float masked softmax, the same function, the mask a view of the comparison that made it
    (no expand, no copy per head or query row)."""
    m, x = InputMasked(kind).eval(), _padded()
    p = bound(SdpaAsMatmuls(), "cortex-m55")
    gm = p(graph_of(m, x))
    assert len(p.report()["rewritten"]) == 1 and SDPA not in called(gm)
    (sm,) = [n for n in gm.graph.nodes if n.target is FLOAT_MASKED]
    mask = sm.args[1]
    src = mask.args[0] if mask.target is aten.view.default else mask
    assert src.target in COMPARE and mask.meta["val"].dtype == torch.bool, (mask.target, src.target)
    assert aten.masked_fill_.Scalar not in called(gm) and aten.expand.default not in called(gm)
    with torch.no_grad():
        torch.testing.assert_close(gm(x), m(x), atol=1e-5, rtol=1e-5)
        x2 = _padded()
        x2[1, :, -1] = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 0.0])   # another mask: the graph computes it
        torch.testing.assert_close(gm(x2), m(x2), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("kind", ["bool_keys", "float_3d"])
def test_a_fully_masked_row_gives_zeros(kind: str) -> None:
    """A query that attends to nothing: zeros, as torch's scaled_dot_product_attention gives (a plain softmax of
    all -inf would be NaN), the other entry unchanged."""
    m, x = InputMasked(kind).eval(), _padded()
    x[1, :, -1] = 1.0                                                # entry 1: every key is padding
    p = bound(SdpaAsMatmuls(), "cortex-m55")
    gm = p(graph_of(m, _padded()))
    with torch.no_grad():
        got, want = gm(x), m(x)
    assert bool((got[1] == 0).all()) and not bool(torch.isnan(got).any())
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_input_dependent_masks_it_cannot_take_are_left() -> None:
    """A float mask with finite values from the inputs, and a bool made other than by comparing with a number,
    keep the op."""
    class Finite(torch.nn.Module):
        def forward(self, q: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
            return F.scaled_dot_product_attention(q, q, q, attn_mask=bias * 2.0)

    class Anded(torch.nn.Module):
        def forward(self, q: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            return F.scaled_dot_product_attention(q, q, q, attn_mask=(mask > 0) & (mask < 3))

    for m in (Finite(), Anded()):
        p = bound(SdpaAsMatmuls(), "cortex-m55")
        gm = p(graph_of(m.eval(), torch.randn(1, 2, 4, 8), torch.randn(4, 4)))
        assert p.report()["rewritten"] == [] and SDPA in called(gm)


def test_the_program_is_int8() -> None:
    low, _ = lowered(Attn("padding"), torch.randn(1, 6, 16), "cortex-m55")
    assert low.extra["verify"]["float_islands"] == []


@pytest.mark.parametrize("kind", ["mha", "bool_keys"])
def test_an_input_mask_program_is_int8(kind: str) -> None:
    """The mask from the inputs: int8 bmm -> emlkit::masked_softmax (the comparison on codes) -> bmm, no float op."""
    low, _ = lowered(InputMasked(kind), _padded(1), "cortex-m55")
    assert low.extra["verify"]["float_islands"] == [] and low.extra["verify"]["broken"] == []
    names = [str(n.target) for n in low.edge.exported_program().graph.nodes if n.op == "call_function"]
    assert sum("emlkit.masked_softmax" in t for t in names) == 1, names
    assert not any("emlkit_float" in t or "softmax" in t and "masked" not in t for t in names), names


class ConstAndInput(_Masked):
    """Attention over 6 tokens with a constant mask and one from the input x (its last feature flags padded
    tokens), joined as KIND does: nn.MultiheadAttention adds its float attn_mask (causal, or a bool one it turns
    into 0 / -inf) to key_padding_mask's -inf fill; SDPA takes `keep & ~pad` or `keep & (flag <= 0.5)`."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind, torch.nn.TransformerDecoderLayer)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pad = x[..., -1] > 0.5
        causal = torch.nn.Transformer.generate_square_subsequent_mask(6)
        if self.kind == "mha":
            return self.mha(x, x, x, attn_mask=causal, key_padding_mask=pad, need_weights=False)[0]
        if self.kind == "mha_bool":   # True: left out
            later = torch.ones(6, 6, dtype=torch.bool).triu(1)
            return self.mha(x, x, x, attn_mask=later, key_padding_mask=pad, need_weights=False)[0]
        if self.kind == "decoder":
            return self.layer(x, x[:, :4], tgt_mask=causal, tgt_key_padding_mask=pad)
        q, k, v = self.proj(x).reshape(-1, 6, 3, 2, 8).permute(2, 0, 3, 1, 4)
        keep = torch.ones(6, 6, dtype=torch.bool).tril()
        if self.kind == "sdpa_not":
            return F.scaled_dot_product_attention(q, k, v, attn_mask=keep & ~pad[:, None, None, :])
        if self.kind == "sdpa_compare":
            return F.scaled_dot_product_attention(q, k, v, attn_mask=(x[..., -1] <= 0.5)[:, None, None, :] & keep)
        raise ValueError(self.kind)


@pytest.mark.parametrize("kind", ["mha", "mha_bool", "decoder", "sdpa_not", "sdpa_compare"])
def test_constant_and_input_mask_is_its_definition(kind: str) -> None:
    """The masks joined into one bool: the comparison's view [B, 1, 1, 6] OR the constant's left-out keys
    [6, 6] (a bool constant), into the float masked softmax; the same function, the constant's ops gone."""
    m, x = ConstAndInput(kind).eval(), _padded()
    p = bound(SdpaAsMatmuls(), "cortex-m55")
    gm = p(graph_of(m, x))
    assert SDPA not in called(gm) and len(p.report()["rewritten"]) == (2 if kind == "decoder" else 1)
    (sm,) = [n for n in gm.graph.nodes if n.target is FLOAT_MASKED]
    joined = sm.args[1]
    assert joined.target is aten.logical_or.default, joined.target
    view, const = joined.args
    assert view.target is aten.view.default and view.args[0].target in COMPARE
    assert list(view.meta["val"].shape) == [2, 1, 1, 6]
    table = getattr(gm, const.target)
    assert table.dtype == torch.bool and torch.equal(table, torch.ones(6, 6, dtype=torch.bool).triu(1))
    left = {aten.full.default, aten.ones.default, aten.triu.default, aten.tril.default, aten.masked_fill_.Scalar,
            aten.add.Tensor if kind != "decoder" else None, aten.__and__.Tensor, aten.bitwise_not.default,
            aten.expand.default}
    assert not left & set(called(gm)), set(called(gm))
    with torch.no_grad():
        torch.testing.assert_close(gm(x), m(x), atol=1e-5, rtol=1e-5)
        x2 = _padded()
        x2[1, :, -1] = torch.tensor([0.0, 1.0, 0.0, 1.0, 1.0, 0.0])   # another padding: the graph computes it
        torch.testing.assert_close(gm(x2), m(x2), atol=1e-5, rtol=1e-5)


def test_constant_and_input_masks_it_cannot_take_are_left() -> None:
    """Beside a mask from the inputs: a constant with a finite bias, one that differs per head, one that leaves a
    query row nothing, and two masks from the inputs keep the op."""
    class Joined(torch.nn.Module):
        def __init__(self, kind: str) -> None:
            super().__init__()
            self.kind = kind

        def forward(self, q: torch.Tensor, flag: torch.Tensor) -> torch.Tensor:
            pad = torch.zeros(4, 4).masked_fill_(flag > 0.5, float("-inf"))   # [4, 4]: per query row and key
            if self.kind == "bias":
                const = torch.zeros(4, 4)
                const[:, 1] = -2.0
            elif self.kind == "per_head":
                const = torch.zeros(2, 4, 4)
                const[0, :, 3] = float("-inf")
            elif self.kind == "empty_row":
                const = torch.zeros(4, 4)
                const[2] = float("-inf")
            else:
                const = torch.zeros(4, 4).masked_fill_(flag < -0.5, float("-inf"))
            return F.scaled_dot_product_attention(q, q, q, attn_mask=const + pad)

    for kind in ("bias", "per_head", "empty_row", "both_inputs"):
        p = bound(SdpaAsMatmuls(), "cortex-m55")
        gm = p(graph_of(Joined(kind).eval(), torch.randn(1, 2, 4, 8), torch.randn(4, 4)))
        assert p.report()["rewritten"] == [] and SDPA in called(gm), kind


def test_a_constant_and_input_mask_program_is_int8() -> None:
    """int8 bmm -> emlkit::masked_softmax -> bmm, its mask a logical_or of bools (exact: the verifier counts it
    as no float op)."""
    low, _ = lowered(ConstAndInput("mha"), _padded(1), "cortex-m55")
    assert low.extra["verify"]["float_islands"] == [] and low.extra["verify"]["broken"] == []
    names = [str(n.target) for n in low.edge.exported_program().graph.nodes if n.op == "call_function"]
    assert sum("emlkit.masked_softmax" in t for t in names) == 1, names
    assert sum("aten.logical_or" in t for t in names) == 1, names
    assert not any("emlkit_float" in t or "softmax" in t and "masked" not in t for t in names), names


def test_pipelines() -> None:
    assert_pipelines(SdpaAsMatmuls, on=("cortex-m55", "cortex-m0plus"), off=("ethos-u55-128",))
