"""What a MODEL argument names: a zoo model, a model file (.py) or a case file (.pt), checked without torch.

The CLI calls this before anything imports torch, so a misspelt name or a missing file costs well under a second;
emlkit/load.py calls it too, so both say the same thing."""

from __future__ import annotations

from pathlib import Path

from emlkit import models
from emlkit.errors import AotError


def model_kind(spec: str) -> str:
    """"zoo", "case" or "file"; an AotError naming the accepted forms when SPEC is none of them or its file is
    missing."""
    path = Path(spec)
    if spec in models.ZOO:
        return "zoo"
    if path.suffix == ".pt":
        if not path.is_file():
            raise AotError(f"case file not found: {spec}")
        return "case"
    if path.suffix != ".py":
        raise AotError(
            f"unknown model '{spec}': give a zoo name ({', '.join(models.ZOO)}), "
            "a path to a .py file defining ModelUnderTest and ModelInputs, or a .pt case file"
        )
    if not path.is_file():
        raise AotError(f"model file not found: {spec}")
    return "file"
