"""embedding_as_int8_gather.py: an embedding lookup followed by its quantize becomes a gather of the table's
int8 codes (Cortex-M): exactly the codes the float lookup and the quantize gave, and no float op."""

from __future__ import annotations

import torch

from emlkit import reference
from emlkit.passes.embedding_as_int8_gather import EmbeddingAsInt8Gather
from emlkit.compile import make_options
from emlkit.lower import cortex_m
from emlkit.passes.manager import STAGE_FIELD, pass_name
from emlkit.targets import get_target
from pass_graphs import assert_pipelines, installed, program_ops


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.e = torch.nn.Embedding(40, 12)
        self.l = torch.nn.Linear(12, 3)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.l(self.e(idx))


def lowered(idx: torch.Tensor, drop: tuple[str, ...] = (), **options: object) -> tuple[object, object]:
    """Net lowered for cortex-m55, calibrated on random indices (pass_graphs.lowered draws float inputs)."""
    opts = make_options(**options)
    for name in STAGE_FIELD.values():
        setattr(opts, name, [p for p in getattr(opts, name) if pass_name(p) not in drop])
    g = torch.Generator().manual_seed(2)
    data = [(idx,)] + [(torch.randint(0, 40, idx.shape, generator=g),) for _ in range(2)]
    with torch.no_grad():
        return cortex_m.lower(Net().eval(), (idx,), data, get_target("cortex-m55"), opts), opts


def test_lookup_is_an_int8_gather_with_the_same_codes() -> None:
    idx = torch.randint(0, 40, (2, 5), generator=torch.Generator().manual_seed(1))
    low, opts = lowered(idx)
    assert installed(opts, EmbeddingAsInt8Gather).report()["rewritten"]
    ops = program_ops(low)
    assert not any("embedding" in o for o in ops) and any("index_select" in o for o in ops), ops
    assert low.extra["verify"]["float_islands"] == []
    # Same outputs as the program without the pass, bit for bit: the gather of quantized codes equals the
    # quantize of the gathered floats.
    ref, _ = lowered(idx, drop=("EmbeddingAsInt8Gather",), allow_float=True)
    a = reference.run_lowered(low.edge, (idx,))
    b = reference.run_lowered(ref.edge, (idx,))
    assert all(torch.equal(x, y) for x, y in zip(a, b))


def test_pipelines() -> None:
    assert_pipelines(EmbeddingAsInt8Gather, on=("cortex-m55", "cortex-m0plus"), off=("ethos-u55-128",))
