"""Accuracy figures of a lowered program against the float model."""

from __future__ import annotations

import math
from typing import Sequence

import torch


def snr_db(reference: torch.Tensor, actual: torch.Tensor) -> float:
    """Signal-to-noise ratio of `actual` against `reference` in dB (inf when identical)."""
    ref = reference.detach().double().flatten()
    err = ref - actual.detach().double().flatten()
    noise = float((err * err).sum())
    signal = float((ref * ref).sum())
    if noise == 0.0:
        return math.inf
    if signal == 0.0:
        return -math.inf
    return 10.0 * math.log10(signal / noise)


def compare(reference: Sequence[torch.Tensor], actual: Sequence[torch.Tensor]) -> list[dict[str, float]]:
    """Per output: SNR and max abs error (in the output's own units)."""
    rows = []
    for r, a in zip(reference, actual):
        r = r.float().contiguous()
        a = a.float().contiguous()
        rows.append({"snr_db": snr_db(r, a), "max_abs": float((r - a).abs().max()) if r.numel() else 0.0})
    return rows


def flatten_outputs(out: object) -> list[torch.Tensor]:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        flat: list[torch.Tensor] = []
        for o in out:
            flat.extend(flatten_outputs(o))
        return flat
    raise TypeError(f"model output of type {type(out).__name__} is not a tensor or a tuple of tensors")
