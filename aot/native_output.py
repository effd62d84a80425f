"""Native libraries (Vela, tosa_reference_model) print on file descriptor 1 behind Python's back; this
keeps that text in the debug log instead of the user's terminal or the suite's table."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import tempfile
from typing import Iterator


@contextlib.contextmanager
def stdout_to_log(logger: logging.Logger, what: str) -> Iterator[None]:
    sys.stdout.flush()
    saved = os.dup(1)
    with tempfile.TemporaryFile(mode="w+b") as tmp:
        os.dup2(tmp.fileno(), 1)
        try:
            yield
        finally:
            sys.stdout.flush()
            os.dup2(saved, 1)
            os.close(saved)
            tmp.seek(0)
            text = tmp.read().decode(errors="replace").strip()
            if text:
                logger.debug("%s output:\n%s", what, text)
