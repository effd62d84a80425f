"""Errors that end a command with one clear line and a fixed exit status."""

from __future__ import annotations

# Exit statuses shared by every command (README.md "Exit statuses" and `--help` print EXIT_TABLE).
EXIT_OK = 0
EXIT_MISMATCH = 1      # the device's outputs differ from the expected ones
EXIT_USAGE = 2         # bad arguments or input files: unknown model/target/board, missing file, bad model file
EXIT_TIMEOUT = 3       # the simulator was stopped at --timeout
EXIT_UNSUPPORTED = 4   # the model uses something the toolkit cannot lower or run (named in the message)
EXIT_SKIP = 5          # a tool or simulator this machine lacks, or an NPU feature the model cannot judge
EXIT_INTERNAL = 6      # a bug in the toolkit (the message says so; -v shows the traceback)
EXIT_DEVICE = 7        # the firmware stopped with an error (e.g. an NPU fault) or crashed
EXIT_INTERRUPTED = 130  # Ctrl-C
EXIT_SIM = EXIT_TIMEOUT  # older name
EXIT_FIT = EXIT_UNSUPPORTED  # the program does not fit the board's memories (one line: needs and sizes)

EXIT_TABLE = (
    (EXIT_OK, "pass"),
    (EXIT_MISMATCH, "wrong output: the device's outputs differ from the expected ones"),
    (EXIT_USAGE, "usage error: bad arguments, unknown model/target/board, missing or invalid input file"),
    (EXIT_TIMEOUT, "timeout: the simulator was stopped at --timeout"),
    (EXIT_UNSUPPORTED, "unsupported model: an op or pattern the toolkit cannot lower or run (named), or a program "
                       "that does not fit the board's memories (needs and sizes per memory)"),
    (EXIT_SKIP, "skipped: a tool or simulator is missing (e.g. --sim fvp without an FVP), or the NPU model "
                "lacks a feature the program uses"),
    (EXIT_INTERNAL, "internal error: a bug in the toolkit"),
    (EXIT_DEVICE, "device error: the firmware reported an error (its status code is named) or crashed"),
    (EXIT_INTERRUPTED, "interrupted (Ctrl-C)"),
)


def exit_table_text() -> str:
    return "exit statuses:\n" + "\n".join(f"  {code:<4} {text}" for code, text in EXIT_TABLE)


class AotError(Exception):
    """A user-facing failure: `str(err)` is the one line shown, `exit_code` the status."""

    def __init__(self, message: str, exit_code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def cause_chain(exc: BaseException, context: bool = False) -> list[BaseException]:
    """EXC and the exceptions it was raised from (`__cause__`; with CONTEXT also `__context__`), outermost first.
    ExecuTorch's pass manager and Vela wrap the error that says what went wrong in one or more others."""
    chain: list[BaseException] = []
    e: BaseException | None = exc
    while e is not None and all(e is not c for c in chain):
        chain.append(e)
        e = e.__cause__ or (e.__context__ if context else None)
    return chain
