"""A decoder over right-padded tokens, the pattern of nn.Transformer users: a causal mask (a constant) and a key
padding mask computed from the tokens (`tokens == PAD`) on the self-attention. nn.MultiheadAttention adds the two
as 0 / -inf masks; sdpa_as_matmuls.py turns that into one bool, the constant's left-out keys OR the padding (a
logical_or of bools), which int8 bmm -> emlkit::masked_softmax -> bmm reads: all int8 without --allow-float."""
import torch
import torch.nn as nn

torch.manual_seed(0)
PAD = 0


class CausalPaddedDecoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(12, 16, padding_idx=PAD)
        self.dec = nn.TransformerDecoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
        self.head = nn.Linear(16, 12)

    def forward(self, tokens: torch.Tensor, memory: torch.Tensor) -> torch.Tensor:
        causal = nn.Transformer.generate_square_subsequent_mask(tokens.shape[1])
        y = self.dec(self.emb(tokens), memory, tgt_mask=causal, tgt_key_padding_mask=tokens == PAD)
        return self.head(y)


ModelUnderTest = CausalPaddedDecoder().eval()
ModelInputs = (torch.tensor([[5, 3, 9, 2, 7, 1, PAD, PAD]]), torch.randn(1, 4, 16))
