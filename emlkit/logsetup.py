"""Logging set-up shared by the CLI, the suite and the scripts (its own module so none imports the CLI)."""

from __future__ import annotations

import logging
import sys


class _OwnRecordsFilter(logging.Filter):
    """Without --verbose, show our INFO and others' ERROR only (ExecuTorch warns a lot)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.name.startswith("emlkit") or record.levelno >= logging.ERROR


def setup_logging(verbose: bool) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s" if verbose else "%(message)s"))
    if not verbose:
        handler.addFilter(_OwnRecordsFilter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    if not verbose:
        # torch sets its loggers up when imported (undoing levels set earlier) and
        # torchao warns about optional CUDA libraries at import: import both, then quiet them.
        import torch  # noqa: F401

        def quiet() -> None:
            for name in ["torch", "torchao", "executorch", *logging.root.manager.loggerDict]:
                if name.startswith(("torch", "executorch")):
                    logging.getLogger(name).setLevel(logging.ERROR)

        quiet()
        import torchao.quantization.pt2e.quantize_pt2e  # noqa: F401

        quiet()
