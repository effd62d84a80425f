"""Import cycles among this repo's Python modules (emlkit/ and scripts/), found with ast.

Every `import x` / `from x import y` naming one of our modules counts, at module level and
inside functions alike (a deferred import hides a cycle at import time but it is still one
module needing the other). `from pkg import name` counts as an import of `pkg.name` when that
is a module, else of `pkg`. A package's `__init__` counts as imported by its submodules only
through their explicit imports (Python runs it first anyway, but that is not a dependency the
code chose). Cycles are the strongly connected components with more than one module, or a module
importing itself.

Usage: python -m scripts.import_cycles [--root DIR] [--edges]; exit status 0 when there is no
cycle, 1 when there is one (each printed on one line), 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import ast
import logging
import sys
from pathlib import Path

log = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("emlkit", "scripts")


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def find_modules(root: Path) -> dict[str, Path]:
    mods: dict[str, Path] = {}
    for pkg in PACKAGES:
        for path in sorted((root / pkg).rglob("*.py")):
            mods[module_name(root, path)] = path
    return mods


def _resolve(current: str, is_pkg: bool, level: int, name: str | None) -> str:
    if level == 0:
        return name or ""
    base = current.split(".") if is_pkg else current.split(".")[:-1]
    base = base[: len(base) - (level - 1)] if level > 1 else base
    return ".".join([*base, *(name.split(".") if name else [])])


def imports_of(mod: str, path: Path, known: set[str]) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    is_pkg = path.name == "__init__.py"
    out: set[str] = set()

    def add(name: str) -> None:
        # The longest known module the dotted name starts with.
        parts = name.split(".")
        for i in range(len(parts), 0, -1):
            cand = ".".join(parts[:i])
            if cand in known:
                if cand != mod or i == len(parts):
                    out.add(cand)
                return

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                add(a.name)
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(mod, is_pkg, node.level, node.module)
            for a in node.names:
                full = f"{base}.{a.name}" if base else a.name
                add(full if full in known else base)
    out.discard(mod)
    return out


def graph(root: Path) -> dict[str, set[str]]:
    mods = find_modules(root)
    known = set(mods)
    return {m: imports_of(m, p, known) for m, p in mods.items()}


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for start in sorted(g):
        if start in index:
            continue
        work = [(start, iter(sorted(g[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(g.get(w, ())))))
                    advanced = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return sorted(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", type=Path, default=REPO, help="repository root (default: this checkout)")
    ap.add_argument("--edges", action="store_true", help="also print each module's imports of our modules")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    g = graph(args.root)
    if args.edges:
        for m in sorted(g):
            print(f"{m}: {', '.join(sorted(g[m]))}")
    found = cycles(g)
    for c in found:
        print("cycle: " + " <-> ".join(c))
    print(f"{len(found)} import cycle(s) among {len(g)} modules")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
