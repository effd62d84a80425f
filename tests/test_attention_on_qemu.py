"""PyTorch's attention modules in int8 on cortex-m55, cortex-m4 and cortex-m0plus (an385-m0plus) under QEMU (issue 30):
nn.TransformerEncoderLayer (relu and post-norm, sequence first, with a key padding mask; gelu and pre-norm, batch
first, causal), nn.TransformerDecoderLayer (tanh GELU, causal, cross-attention), nn.MultiheadAttention with a key
padding mask and F.scaled_dot_product_attention with a bool and a float mask, in one model compiled without
--allow-float: no aten:: compute op is left, the device's outputs equal the host reference bit for bit, and each
output's SNR against the float model is at least the floor the README states."""

from __future__ import annotations

from pathlib import Path

import pytest
from qemu_run_lib import run_bit_exact

_MODEL = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.enc_post = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0)  # relu, post-norm, sequence first
        self.enc_pre = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, activation="gelu", batch_first=True,
                                                  norm_first=True)
        self.dec = nn.TransformerDecoderLayer(16, 2, 32, dropout=0.0, batch_first=True,
                                              activation=lambda t: F.gelu(t, approximate="tanh"))
        self.mha = nn.MultiheadAttention(16, 2, batch_first=True)
        self.qkv = nn.Linear(16, 48)

    def forward(self, x):
        pad = torch.zeros(1, 6, dtype=torch.bool)
        pad[:, -2:] = True
        causal = nn.Transformer.generate_square_subsequent_mask(6)
        a = self.enc_post(x.transpose(0, 1), src_key_padding_mask=pad).transpose(0, 1)
        b = self.enc_pre(x, src_mask=causal, is_causal=True)
        c = self.dec(x, b[:, :4], tgt_mask=causal, tgt_is_causal=True)
        d = self.mha(x, x, x, key_padding_mask=pad, need_weights=False)[0]
        q, k, v = self.qkv(x).reshape(1, 6, 3, 2, 8).permute(2, 0, 3, 1, 4)
        keep = torch.ones(6, 6, dtype=torch.bool).tril()
        bias = torch.zeros(6, 6)
        bias[:, 0] = -1.0
        bias[:, 3] = float("-inf")
        e = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
        f = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
        return a, b, c, d, e, f


ModelUnderTest = Attention().eval()
ModelInputs = (torch.randn(1, 6, 16, generator=torch.Generator().manual_seed(1)),)
'''

# The README's SNR floor against the float model (dB), per output: the two encoder layers, the decoder layer,
# MultiheadAttention, SDPA with the bool and with the float mask.
SNR_FLOOR_DB = [30.0] * 6


@pytest.mark.parametrize("target, board", [
    pytest.param("cortex-m55", None, marks=pytest.mark.slow), pytest.param("cortex-m4", None, marks=pytest.mark.slow),
    pytest.param("cortex-m0plus", "an385-m0plus", marks=pytest.mark.slow)])
def test_attention_bit_exact_on_qemu(tmp_path: Path, target: str, board: str | None) -> None:
    ops, snrs = run_bit_exact(tmp_path, "attention", _MODEL, target, board, len(SNR_FLOOR_DB), timeout=1800)
    assert ops.get("emlkit::softmax", 0) >= 6 and ops.get("cortex_m::quantized_batch_matmul", 0) >= 12, ops
    assert all(s >= f for s, f in zip(snrs, SNR_FLOOR_DB)), snrs
