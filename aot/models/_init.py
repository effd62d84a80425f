"""Weight helpers for zoo models: BatchNorm statistics and channel ranges like trained layers have.

Freshly constructed layers have BatchNorm running stats of exactly 0 / 1 and
near-uniform weight ranges, which hides quantization problems a trained model
shows (per-tensor vs per-channel scales, folding). These helpers make them
uneven, deterministically (callers seed torch first).
"""
import torch
import torch.nn as nn


def trained_like(model: nn.Module) -> nn.Module:
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
                m.running_mean.uniform_(-0.3, 0.3)
                m.running_var.uniform_(0.3, 2.0)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
            elif isinstance(m, (nn.Conv1d, nn.Conv2d, nn.Linear)) and m.weight.shape[0] > 1:
                spread = torch.logspace(-0.5, 0.3, m.weight.shape[0])[torch.randperm(m.weight.shape[0])]
                m.weight.mul_(spread.view(-1, *([1] * (m.weight.dim() - 1))))
    return model.eval()
