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
    """Descriptors 1 and 2 into one temporary file for the duration; its text goes to logger.debug."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = {fd: os.dup(fd) for fd in (1, 2)}
    with tempfile.TemporaryFile(mode="w+b") as tmp:
        for fd in saved:
            os.dup2(tmp.fileno(), fd)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            for fd, copy in saved.items():
                os.dup2(copy, fd)
                os.close(copy)
            tmp.seek(0)
            text = tmp.read().decode(errors="replace").strip()
            if text:
                logger.debug("%s output:\n%s", what, text)
