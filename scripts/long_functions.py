"""Functions longer than a limit in this repo's Python (emlkit/, scripts/, tests/; with ast) and C (firmware/, tests/;
by braces: a definition is a `{` at file level whose opening text ends in `)`, attributes and macros left out).

The project keeps at most 5 functions over 80 lines and none over 150 (tests/test_structure.py).

Usage: python -m scripts.long_functions [--over N]; prints one line per function over N lines (default 80), longest
first, then a count; exit status 0.
"""

from __future__ import annotations

import argparse
import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'", re.S)
_MACRO = re.compile(r"^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", re.M)
_ATTRIBUTE = re.compile(r"__attribute__\s*\(\((?:[^()]|\([^()]*\))*\)\)")
_DEFINITION = re.compile(r"(\w+)\s*\([^;{}]*\)\s*$", re.S)


def python_functions(root: Path = REPO) -> list[tuple[int, str]]:
    out = []
    for pkg in ("emlkit", "scripts", "tests"):
        for path in sorted((root / pkg).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    out.append((node.end_lineno - node.lineno + 1,
                                f"{path.relative_to(root)}:{node.lineno} {node.name}"))
    return out


def _blank(match: re.Match[str]) -> str:
    """A comment or literal as spaces, its newlines kept: braces inside it do not count, line numbers stay."""
    return re.sub(r"[^\n]", " ", match.group(0))


def c_functions_in(text: str, name: str) -> list[tuple[int, str]]:
    """(lines, "NAME:line function") of every function defined at file level in the C source TEXT."""
    code = _COMMENT.sub(_blank, text)
    code = _MACRO.sub(_blank, code)  # preprocessor lines, continuations included
    out, depth, start, last = [], 0, 0, 0
    for i, ch in enumerate(code):
        if ch == "{":
            if depth == 0:
                start = i
                head = _ATTRIBUTE.sub(" ", code[last:i])
                m = _DEFINITION.search(head)
                func = m.group(1) if m and not re.search(r"\b(struct|union|enum)\b[^()]*$", head) else None
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                if func is not None:
                    first = code.count("\n", 0, start) + 1
                    lines = code.count("\n", start, i) + 1
                    out.append((lines, f"{name}:{first} {func}"))
                last = i + 1
        elif ch == ";" and depth == 0:
            last = i + 1
    return out


def c_functions(root: Path = REPO) -> list[tuple[int, str]]:
    out = []
    for folder in ("firmware", "tests"):
        for path in sorted((root / folder).rglob("*.[ch]")):
            out += c_functions_in(path.read_text(errors="replace"), str(path.relative_to(root)))
    return out


def long_functions(over: int = 80, root: Path = REPO) -> list[tuple[int, str]]:
    return sorted((f for f in python_functions(root) + c_functions(root) if f[0] > over), reverse=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--over", type=int, default=80, help="report functions longer than this many lines (default 80)")
    args = ap.parse_args(argv)
    found = long_functions(args.over)
    for lines, where in found:
        print(f"{lines:5d} {where}")
    print(f"{len(found)} function(s) over {args.over} lines")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
