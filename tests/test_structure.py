"""Repository structure: no import cycles among emlkit/ and scripts/ (scripts/import_cycles.py), no monkeypatching
of other projects (public ExecuTorch API only), short functions (scripts/long_functions.py)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from scripts.import_cycles import cycles, graph, main
from scripts.long_functions import c_functions_in, long_functions

REPO = Path(__file__).resolve().parent.parent


def test_no_import_cycles() -> None:
    found = cycles(graph(REPO))
    assert found == [], f"import cycles: {found}"


def test_functions_are_short() -> None:
    """At most 5 functions over 80 lines in the repo's Python and C, and none over 150."""
    over = long_functions(80)
    assert len(over) <= 5 and all(lines <= 150 for lines, _ in over), over


def test_c_function_lengths_are_counted() -> None:
    src = """#include <stdint.h>
#define MAC(a, b) \\
  do {            \\
    x += a * b;   \\
  } while (0)
static const int8_t table[3] = {1, 2, 3};
typedef struct { int a; } pair; /* { not a function } */
__attribute__((always_inline)) static inline int
add(int a, int b) {
  const char *s = "}{";
  return a + b;
}
void f(void) __attribute__((noinline));
int g(void) {
  if (1) {
    return 0;
  }
  return 1;
}
"""
    assert c_functions_in(src, "t.c") == [(4, "t.c:9 add"), (6, "t.c:14 g")]


def test_checker_finds_a_cycle(tmp_path: Path) -> None:
    pkg = tmp_path / "emlkit"
    (pkg / "sub").mkdir(parents=True)
    (tmp_path / "scripts").mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from emlkit.sub import b\n")   # deferred imports count
    (pkg / "sub" / "b.py").write_text("from ..c import x\n")
    (pkg / "c.py").write_text("import emlkit.a\nx = 1\n")
    (pkg / "d.py").write_text("from emlkit import c\n")
    g = graph(tmp_path)
    assert g["emlkit.d"] == {"emlkit.c"}
    assert cycles(g) == [["emlkit.a", "emlkit.c", "emlkit.sub.b"]]
    assert main(["--root", str(tmp_path)]) == 1
    (pkg / "c.py").write_text("x = 1\n")
    assert main(["--root", str(tmp_path)]) == 0


def _foreign_names(tree: ast.Module) -> set[str]:
    """Names a module binds by importing from other projects (anything not emlkit/scripts/tests)."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 \
                and node.module.split(".")[0] not in ("emlkit", "aot", "scripts", "tests", "__future__"):
            out.update(a.asname or a.name for a in node.names)
        elif isinstance(node, ast.Import):
            out.update((a.asname or a.name).split(".")[0] for a in node.names
                       if a.name.split(".")[0] not in ("emlkit", "aot", "scripts", "tests"))
    return out


def monkeypatches(source: str) -> list[str]:
    """`Foreign.attr = ...` / `setattr(Foreign, ...)` on a name imported from another project."""
    tree = ast.parse(source)
    foreign = _foreign_names(tree)
    found = []
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr" and node.args:
            targets = [ast.Attribute(value=node.args[0], attr="?")]
        for t in targets:
            root = t
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(t, ast.Attribute) and isinstance(root, ast.Name) and root.id in foreign:
                found.append(f"line {node.lineno}: {ast.unparse(t)}")
    return found


def test_checker_finds_a_monkeypatch() -> None:
    src = ("from executorch.backends.arm.ethosu.backend import EthosUBackend\nimport torch\n"
           "EthosUBackend._compile_tosa_flatbuffer = staticmethod(print)\nsetattr(torch.ops, 'x', 1)\n"
           "class A:\n    pass\nA.b = 1\n")
    assert monkeypatches(src) == ["line 3: EthosUBackend._compile_tosa_flatbuffer", "line 4: torch.ops.?"]


# Nothing is known and tolerated any more (we removed the EthosUBackend patch and the swap of F in
# ExecuTorch's cortex_m operators module: emlkit/exact_int_conv.py now calls the ops with zero-dilated weights).
KNOWN: dict[str, list[str]] = {}


@pytest.mark.parametrize("path", sorted(str(p.relative_to(REPO)) for d in ("emlkit", "aot", "scripts")
                                        for p in (REPO / d).rglob("*.py")))
def test_no_monkeypatching_of_other_projects(path: str) -> None:
    # An entry of KNOWN that no longer patches fails too, so the list cannot go stale.
    assert monkeypatches((REPO / path).read_text()) == KNOWN.get(path, [])
