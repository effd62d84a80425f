"""The one error type of the functional model: a clear, one-line message."""

from __future__ import annotations

from emlkit.errors import AotError


class NpuError(AotError):
    """Malformed blob, unknown command, or a feature the model does not cover (message names it)."""
