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


# Masks computed from the inputs (emlkit::masked_softmax): an encoder layer's src_key_padding_mask and
# MultiheadAttention's key_padding_mask (x's last feature flags padding), and SDPA with a bool mask per batch entry
# and query row (True attends). (Batch 1 for the layers: a batch-2 MultiheadAttention fails in ExecuTorch's
# lowering with a constant mask too, "Cannot view a tensor with shape [6, 2, 16]".)
_INPUT_MASKS = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class InputMasks(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.enc = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
        self.mha = nn.MultiheadAttention(16, 2, batch_first=True)
        self.qkv = nn.Linear(16, 48)

    def forward(self, x, y):
        pad = x[..., -1] > 0.5
        a = self.enc(x, src_key_padding_mask=pad)
        b = self.mha(x, x, x, key_padding_mask=pad, need_weights=False)[0]
        q, k, v = self.qkv(y).reshape(2, 6, 3, 2, 8).permute(2, 0, 3, 1, 4)
        c = F.scaled_dot_product_attention(q, k, v, attn_mask=(y[..., :6] > -0.5).unsqueeze(1))
        return a, b, c


ModelUnderTest = InputMasks().eval()
_x = torch.randn(1, 6, 16, generator=torch.Generator().manual_seed(1))
_x[..., -1] = 0.0
_x[0, 4:, -1] = 1.0
_y = torch.randn(2, 6, 16, generator=torch.Generator().manual_seed(2))
_y[..., 0] = _y[..., 0].abs() - 0.4
ModelInputs = (_x, _y)
'''

# A constant mask with one from the inputs (issue 30): MultiheadAttention with a causal float attn_mask and with a
# bool one (True: left out) beside key_padding_mask (x's last feature flags padding; it adds them as 0 / -inf), and
# SDPA with `causal & ~pad` per batch entry. Each becomes one bool, the constant's left-out keys OR the input's
# (aten::logical_or of bools), read by emlkit::masked_softmax.
_CAUSAL_PADDING = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalPadding(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.mha = nn.MultiheadAttention(16, 2, batch_first=True)
        self.mha_bool = nn.MultiheadAttention(16, 2, batch_first=True)
        self.qkv = nn.Linear(16, 48)

    def forward(self, x, y):
        pad = x[..., -1] > 0.5
        causal = nn.Transformer.generate_square_subsequent_mask(6)
        a = self.mha(x, x, x, attn_mask=causal, key_padding_mask=pad, need_weights=False)[0]
        later = torch.ones(6, 6, dtype=torch.bool).triu(1)
        b = self.mha_bool(x, x, x, attn_mask=later, key_padding_mask=pad, need_weights=False)[0]
        q, k, v = self.qkv(y).reshape(2, 6, 3, 2, 8).permute(2, 0, 3, 1, 4)
        keep = torch.ones(6, 6, dtype=torch.bool).tril()
        c = F.scaled_dot_product_attention(q, k, v, attn_mask=keep & ~(y[..., -1] > 0.5)[:, None, None, :])
        return a, b, c


ModelUnderTest = CausalPadding().eval()
_x = torch.randn(1, 6, 16, generator=torch.Generator().manual_seed(1))
_x[..., -1] = 0.0
_x[0, 4:, -1] = 1.0
_y = torch.randn(2, 6, 16, generator=torch.Generator().manual_seed(2))
_y[..., -1] = 0.0
_y[0, 5:, -1] = 1.0
_y[1, 2, -1] = 1.0
ModelInputs = (_x, _y)
'''

# Per model: SNR floors against the float model (dB), a few dB under what cortex-m55 and cortex-m4 gave (the same
# codes), and the ops its program must hold. Gave: input_masks (the encoder layer 36.1, MultiheadAttention 33.9,
# SDPA 39.7), attention_key_padding 42.4, causal_padding (MultiheadAttention with the float and the bool causal
# mask 36.3, 37.6, SDPA 38.4), decoder_causal_padding 31.3.
_MODELS = Path(__file__).parent / "models"
_MASK_CASES = {
    "input_masks": (lambda: _INPUT_MASKS, [33.0, 31.0, 36.0], {"emlkit::masked_softmax": 3, "emlkit::softmax": None}),
    "attention_key_padding": (lambda: (_MODELS / "attention_key_padding.py").read_text(), [39.0],
                              {"emlkit::masked_softmax": 1}),
    "causal_padding": (lambda: _CAUSAL_PADDING, [33.0, 34.0, 35.0],
                       {"emlkit::masked_softmax": 3, "aten::logical_or": 3, "emlkit::softmax": None}),
    # tgt_mask causal, tgt_key_padding_mask = tokens == PAD
    "decoder_causal_padding": (lambda: (_MODELS / "decoder_causal_padding.py").read_text(), [29.0],
                               {"emlkit::masked_softmax": 1, "aten::logical_or": 1, "aten::eq": 1,
                                "emlkit::softmax": 1}),
}


@pytest.mark.parametrize("case", list(_MASK_CASES))
@pytest.mark.parametrize("target", [pytest.param("cortex-m55", marks=pytest.mark.slow),
                                    pytest.param("cortex-m4", marks=pytest.mark.slow)])
def test_masked_attention_bit_exact_on_qemu(tmp_path: Path, target: str, case: str) -> None:
    """Each model all int8 without --allow-float, bit-exact, above its SNR floors."""
    source, floors, want = _MASK_CASES[case]
    ops, snrs = run_bit_exact(tmp_path, case, source(), target, None, len(floors), timeout=1800)
    assert {k: ops.get(k) for k in want} == want, ops
    assert all(s >= f for s, f in zip(snrs, floors)), snrs
