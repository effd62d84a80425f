"""A cross-process lock beside a build folder, so that two emlkit commands (or two test workers) building
the same image wait for each other instead of writing into one CMake tree at once."""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def held(folder: Path) -> Iterator[None]:
    """Holds an exclusive lock on `folder.lock` (created beside folder) for the block. The kernel drops the
    lock when the process ends, so a killed build never leaves a stale one behind."""
    lock = folder.with_name(folder.name + ".lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
