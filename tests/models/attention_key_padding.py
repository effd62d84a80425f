"""Attention over a padded sequence, the padding mask computed from the input (a flag feature marks padded
frames): `key_padding_mask = x[..., -1] > 0.5`. The comparison runs on int8 codes (compare_on_codes.py), the
attention as int8 bmm -> emlkit::masked_softmax -> bmm (sdpa_as_matmuls.py): all int8 without --allow-float."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class PaddedAttention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.att = nn.MultiheadAttention(16, 2, batch_first=True)
        self.head = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pad = x[..., -1] > 0.5
        y, _ = self.att(x, x, x, key_padding_mask=pad, need_weights=False)
        return self.head(y.mean(1))


ModelUnderTest = PaddedAttention().eval()
_x = torch.randn(1, 8, 16)
_x[..., -1] = 0.0
_x[:, 6:, -1] = 1.0   # the last two frames are padding
ModelInputs = (_x,)
