"""PyTorch's attention modules in int8 on cortex-m55, cortex-m4 and cortex-m0plus (an385-m0plus) under QEMU (issue 30):
nn.TransformerEncoderLayer (relu and post-norm, sequence first, with a key padding mask; gelu and pre-norm, batch
first, causal), nn.TransformerDecoderLayer (tanh GELU, causal, cross-attention), nn.MultiheadAttention with a key
padding mask and F.scaled_dot_product_attention with a bool and a float mask, in one model compiled without
--allow-float: no aten:: compute op is left, the device's outputs equal the host reference bit for bit, and each
output's SNR against the float model is at least the floor the README states."""

from __future__ import annotations

import json
import os
import re
import runpy
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from emlkit.verify import DATA_MOVEMENT

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


def _snr_db(got: np.ndarray, want: np.ndarray) -> float:
    err = float(np.mean((got.astype(np.float64) - want) ** 2))
    return float("inf") if err == 0 else 10 * np.log10(float(np.mean(want ** 2)) / err)


@pytest.mark.parametrize("target, board", [
    pytest.param("cortex-m55", None, marks=pytest.mark.slow), pytest.param("cortex-m4", None, marks=pytest.mark.slow),
    pytest.param("cortex-m0plus", "an385-m0plus", marks=pytest.mark.slow)])
def test_attention_bit_exact_on_qemu(tmp_path: Path, target: str, board: str | None) -> None:
    model = tmp_path / "attention.py"
    model.write_text(_MODEL)
    cmd = [sys.executable, "-m", "emlkit", "run", str(model), "--target", target, "-o", str(tmp_path / "o"),
           "--save-outputs", str(tmp_path / "saved")] + (["--board", board] if board else [])
    proc = subprocess.run(cmd, cwd=tmp_path, env=dict(os.environ), capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    diffs = re.search(r"max diff vs expected\s+(.*?)\n\s*SNR", proc.stdout, re.S)  # the table wraps long cells
    assert "PASS" in proc.stdout and diffs, proc.stdout[-2000:]
    cells = " ".join(diffs.group(1).split()).split(",")
    assert [d.split()[0] for d in cells] == ["0"] * len(SNR_FLOOR_DB), diffs.group(1)
    (report,) = (tmp_path / "o").glob("*.json")
    ops = json.loads(report.read_text())["ops"]
    assert ops.get("emlkit::softmax", 0) >= 6 and ops.get("cortex_m::quantized_batch_matmul", 0) >= 12, ops
    assert not any(op.startswith("aten::") and op not in DATA_MOVEMENT for op in ops), ops
    ns = runpy.run_path(str(model))
    with torch.no_grad():
        want = ns["ModelUnderTest"](*ns["ModelInputs"])
    snrs = [_snr_db(np.load(tmp_path / "saved" / f"output_{i}.npy"), w.numpy().astype(np.float64))
            for i, w in enumerate(want)]
    assert len(snrs) == len(SNR_FLOOR_DB) and all(s >= f for s, f in zip(snrs, SNR_FLOOR_DB)), snrs
