"""Errors that end a command with one clear line and a fixed exit status."""

from __future__ import annotations

# Exit statuses shared by every command.
EXIT_OK = 0
EXIT_MISMATCH = 1
EXIT_USAGE = 2
EXIT_SIM = 3
EXIT_FIT = 4         # the program does not fit the board's memories (one line: needs and sizes per memory)
EXIT_SKIP = 5        # the run needs a tool or simulator this machine lacks (e.g. --sim fvp without an FVP)


class AotError(Exception):
    """A user-facing failure: `str(err)` is the one line shown, `exit_code` the status."""

    def __init__(self, message: str, exit_code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.exit_code = exit_code
