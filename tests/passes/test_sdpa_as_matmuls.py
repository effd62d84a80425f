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


def test_input_dependent_mask_is_left() -> None:
    class M(torch.nn.Module):
        def forward(self, q: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            return F.scaled_dot_product_attention(q, q, q, attn_mask=mask > 0)

    p = bound(SdpaAsMatmuls(), "cortex-m55")
    gm = p(graph_of(M().eval(), torch.randn(1, 2, 4, 8), torch.randn(4, 4)))
    assert p.report()["rewritten"] == [] and SDPA in called(gm)


def test_the_program_is_int8() -> None:
    low, _ = lowered(Attn("padding"), torch.randn(1, 6, 16), "cortex-m55")
    assert low.extra["verify"]["float_islands"] == []


def test_pipelines() -> None:
    assert_pipelines(SdpaAsMatmuls, on=("cortex-m55", "cortex-m0plus"), off=("ethos-u55-128",))
