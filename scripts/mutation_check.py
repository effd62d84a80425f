"""Mutation check: do the tests notice small wrong changes to the kernels and passes?

Each mutant is one small source change: in firmware/kernels (the code the host build compiles, not
the MVE/DSP branches): a loop bound off by one, a clamp dropped, a rounding term removed, a shift
one bit wrong, a saturation bound or an offset sign changed; in aot/ (passes and the verifier): a
wrong constant or a skipped rewrite/check (a curated list). For each mutant the script copies the
tree into a temporary folder once, applies that one change there (the working tree is never
touched, so Ctrl-C cannot leave a mutant behind), and runs the tests that cover the file:

- killed: the tests failed (or the build did);
- survived: they passed (a gap worth a test);
- stillborn: a kernel mutant that does not compile, or a mutation whose text is no longer in the
  source (not counted).

Usage:
  python -m scripts.mutation_check [--max N] [--seed S] [--only kernels|passes] [--filter TEXT] [--list]
                                   [--timeout SEC] [--no-baseline]
Exit status: 0 when killed/total >= --goal (default 0.9), 1 below it, 2 for bad arguments,
130 when interrupted.
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("mutation_check")

REPO = Path(__file__).resolve().parent.parent
KERNELS = Path("firmware/kernels")
COPY = ("aot", "firmware", "tests", "scripts", "pytest.ini")
PYTEST = ["-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "--no-header"]

# Which tests cover which kernel source (tests/test_kernels.py; the header is in every kernel).
KERNEL_TESTS: dict[str, str] = {
    "minimum.c": "test_minimum_maximum",
    "pad.c": "test_pad",
    "quantize_per_tensor.c": "test_quantize_dequantize",
    "quantized_activation.c": "test_quantized_activation",
    "quantized_add.c": "test_quantized_add",
    "quantized_avg_pool2d.c": "test_quantized_avg_pool2d",
    "quantized_batch_matmul.c": "test_quantized_batch_matmul",
    "quantized_conv2d.c": "test_quantized_conv2d or test_scratch_sizes",
    "quantized_depthwise_conv2d.c": "test_quantized_depthwise or test_scratch_sizes",
    "quantized_div.c": "test_quantized_div",
    "quantized_linear.c": "test_quantized_linear",
    "quantized_max_pool2d.c": "test_quantized_max_pool2d",
    "quantized_mul.c": "test_quantized_mul or test_requantize",
    "quantized_transpose_conv2d.c": "test_quantized_transpose",
    "softmax.c": "test_softmax",
    "transpose.c": "test_transpose",
    "emlkit_softmax.c": "test_emlkit_softmax",
    "emlkit_avg_pool.c": "test_emlkit_avg_pool2d",
    "kernels.h": "test_requantize or test_quantized_add or test_quantized_conv2d or test_quantized_max_pool2d",
}


@dataclass
class Mutant:
    path: str          # relative to the repo
    line: int          # 1-based
    old: str           # the line as it is
    new: str           # the line mutated
    kind: str
    tests: list[str]   # pytest arguments

    def label(self) -> str:
        return f"{self.path}:{self.line} {self.kind}"


# ---------------------------------------------------------------- kernel mutants, generated
def host_lines(text: str) -> list[tuple[int, str]]:
    """(line number, text) of the lines the host build compiles: outside `#if FW_HAVE_*` branches."""
    out = []
    stack: list[tuple[bool, bool]] = []   # (arch condition, in its #if branch)
    for no, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if s.startswith("#if"):
            stack.append(("FW_HAVE_" in s, True))
            continue
        if s.startswith("#elif") and stack:
            arch = stack[-1][0] or "FW_HAVE_" in s
            stack[-1] = (arch, "FW_HAVE_" in s)
            continue
        if s.startswith("#else") and stack:
            stack[-1] = (stack[-1][0], False)
            continue
        if s.startswith("#endif") and stack:
            stack.pop()
            continue
        if s.startswith(("#", "/*", "*", "//")) or not s:
            continue
        if all(not (arch and in_if) for arch, in_if in stack):
            out.append((no, line))
    return out


def _drop_clamp(line: str) -> str | None:
    """k_clamp(EXPR, lo, hi) -> EXPR (the first call on the line)."""
    i = line.find("k_clamp(")
    if i < 0:
        return None
    j, depth, args, start = i + len("k_clamp("), 1, [], i + len("k_clamp(")
    while j < len(line) and depth:
        c = line[j]
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        if (c == "," and depth == 1) or depth == 0:
            args.append(line[start:j])
            start = j + 1
        j += 1
    if depth or len(args) != 3:
        return None
    return line[:i] + "(" + args[0].strip() + ")" + line[j:]


# (kind, pattern, replacement); each is applied at its first match on a line.
LINE_MUTATIONS: list[tuple[str, str, str]] = [
    ("loop bound off by one", r"(for \([^;]*;\s*\w+\s*)<(\s*[^=;][^;]*;)", r"\1<=\2"),
    ("rounding term removed", r"\(1ull << 30\)", "0"),
    ("rounding threshold", r"rem > thr", "rem >= thr"),
    ("rounding to even", r"\(mask >> 1\)", "(mask >> 2)"),
    ("shift one bit short", r">> 31\b", ">> 30"),
    ("right shift wrong", r">>= rs\b", ">>= rs + 1"),
    ("saturation bound", r"(?<![\w.])127(?![\w.])", "126"),
    ("saturation bound", r"-128(?![\w.])", "-127"),
    ("offset sign", r"\+ (p->\w*(?:zp|offset)\w*)", r"- \1"),
    ("offset sign", r"- (p->\w*(?:zp|offset)\w*)", r"+ \1"),
    ("float rounding", r"\brintf?\(", "truncf("),
    ("float rounding", r"\+ 0\.5f?\b", "+ 0.25f"),
]


# Lines whose mutants cannot change any result (equivalent mutants), with the reason; not mutated.
EQUIVALENT: dict[tuple[str, str], str] = {
    ("quantized_avg_pool2d.c", ": (int8_t)k_clamp(zp, -128, 127);"):
        "count > 0 always: padding is at most half the kernel, so every window holds an input element",
}


def kernel_mutants(root: Path) -> list[Mutant]:
    out = []
    for path in sorted((root / KERNELS).glob("*.[ch]")):
        if path.name not in KERNEL_TESTS:
            continue
        rel = str(path.relative_to(root))
        tests = ["tests/test_kernels.py", "-k", f"({KERNEL_TESTS[path.name]}) and not qemu and not compile_for"]
        for no, line in host_lines(path.read_text()):
            if any(f == path.name and text in line for f, text in EQUIVALENT):
                continue
            new = None if "k_clamp(int32_t" in line else _drop_clamp(line)   # not the definition
            if new is not None and new != line:
                out.append(Mutant(rel, no, line, new, "clamp dropped", tests))
            for kind, pat, rep in LINE_MUTATIONS:
                new = re.sub(pat, rep, line, count=1)
                if new != line:
                    out.append(Mutant(rel, no, line, new, kind, tests))
    return out


# ---------------------------------------------------------------- pass mutants, curated
PASS_TESTS_FAST = ["tests/test_kernels.py", "-k", "test_scratch_sizes"]
# tests/test_passes_lut.py cases on small graphs (the zoo cases compile whole models: minutes).
LUT_FAST = ("single_op_chain or random_chains or internal_requantization or branch_stops or multi_input_op "
            "or only_the_table_op or round_half_away")
PASS_MUTANTS: list[tuple[str, str, str, str, list[str]]] = [
    ("aot/passes/kernel_scratch.py", "return _ceil(out_c, 4) * 4 + (0 if direct else _ceil(k_h * k_w * in_c, 16))",
     "return _ceil(out_c, 4) * 4 + (0 if direct else _ceil(k_h * k_w * in_c, 8))", "wrong constant",
     PASS_TESTS_FAST),
    ("aot/passes/kernel_scratch.py", "return 256 * 4 if k_h * k_w * c >= 256 else 0",
     "return 256 * 4 if k_h * k_w * c > 256 else 0", "wrong constant", ["tests/test_kernels.py", "-k",
                                                                       "test_scratch_sizes or avg_pool"]),
    ("aot/passes/kernel_scratch.py", "return groups == 1 and -127 <= input_offset <= 128",
     "return groups == 1 and -128 <= input_offset <= 128", "wrong constant", PASS_TESTS_FAST),
    ("aot/passes/lut_backends.py", "return torch.sign(x) * torch.floor(x.abs() + 0.5)",
     "return torch.round(x)", "rounding", ["tests/test_passes_lut.py", "-k", LUT_FAST]),
    ("aot/passes/lut_fusion.py", "    region.output_q.replace_all_uses_with(replacement)\n",
     "    pass\n", "skip a rewrite step",
     ["tests/test_passes_lut.py", "-k", LUT_FAST]),
    ("aot/passes/manager.py", "    if len(out) != len(decl):", "    if False:", "skip a check",
     ["tests/test_pass_manager.py"]),
    ("aot/passes/manager.py", "            if rank[decl[first][0]] > rank[decl[then][0]]:",
     "            if rank[decl[first][0]] > rank[decl[then][0]] + 1:", "wrong constant",
     ["tests/test_pass_manager.py"]),
    ("aot/adapter_limits.py", "    if lo > hi:\n        _fail(FMT_ACT", "    if lo > hi + 1:\n        _fail(FMT_ACT",
     "off by one", ["tests/test_adapter_limits.py", "-k", "not compile_refuses"]),
    ("aot/adapter_limits.py", "    if mult < 0 or mult > INT32_MAX or shift < -31 or shift > 31:",
     "    if mult < 0 or mult > INT32_MAX or shift < -31 or shift > 32:", "wrong constant",
     ["tests/test_adapter_limits.py", "-k", "not compile_refuses"]),
    ("aot/adapter_limits.py", "    if ozp != -128:\n        _fail(FMT_SOFTMAX_ZP", "    if ozp > 0:\n        _fail(FMT_SOFTMAX_ZP",
     "skip a check", ["tests/test_adapter_limits.py", "-k", "not compile_refuses"]),
]


def pass_mutants(root: Path) -> list[Mutant]:
    out = []
    for rel, old, new, kind, tests in PASS_MUTANTS:
        text = (root / rel).read_text()
        i = text.find(old)
        line = text[:i].count("\n") + 1 if i >= 0 else 0
        out.append(Mutant(rel, line, old, new, kind, tests))
    return out


# ---------------------------------------------------------------- running
def copy_tree(dst: Path) -> None:
    for name in COPY:
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, dst / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(src, dst / name)


# tests/kernels_lib.py's direct host build, one object per source so a mutant recompiles only its file.
CFLAGS = ["-std=gnu11", "-O2", "-fPIC", "-Wall", "-Wextra", "-Wno-unused-parameter", "-Werror"]


def build_objects(tree: Path, sources: list[Path]) -> bool:
    cc = shutil.which("cc") or "gcc"
    objdir = tree / "objs"
    objdir.mkdir(exist_ok=True)
    for src in sources:
        r = subprocess.run([cc, *CFLAGS, "-I", str(tree / KERNELS), "-c", str(src), "-o", str(objdir / f"{src.stem}.o")],
                           capture_output=True, text=True)
        if r.returncode != 0:
            return False
    return True


def link_library(tree: Path) -> Path:
    cc = shutil.which("cc") or "gcc"
    out = tree / "libfw_kernels.so"
    subprocess.run([cc, "-shared", *sorted(str(p) for p in (tree / "objs").glob("*.o")), "-o", str(out), "-lm"],
                   check=True, capture_output=True, text=True)
    return out


def kernel_sources(tree: Path, changed: Path) -> list[Path]:
    """The sources a change to `changed` needs recompiled (a header: all of them)."""
    return [changed] if changed.suffix == ".c" else sorted((tree / KERNELS).glob("*.c"))


def run_mutant(tree: Path, m: Mutant, timeout: float) -> str:
    path = tree / m.path
    original = path.read_text()
    if m.path.startswith("firmware"):
        lines = original.splitlines(keepends=True)
        if lines[m.line - 1].rstrip("\n") != m.old:
            return "stillborn"
        lines[m.line - 1] = m.new + ("\n" if lines[m.line - 1].endswith("\n") else "")
        mutated = "".join(lines)
    else:
        if m.old not in original:
            return "stillborn"
        mutated = original.replace(m.old, m.new, 1)
    path.write_text(mutated)
    env = dict(os.environ, PYTHONPATH=str(tree), PYTHONDONTWRITEBYTECODE="1")
    try:
        if m.path.startswith("firmware"):
            if not build_objects(tree, kernel_sources(tree, path)):
                return "stillborn"
            lib = link_library(tree)
            env["FW_KERNELS_LIB"] = str(lib)
        try:
            r = subprocess.run([sys.executable, *PYTEST, *m.tests], cwd=tree, env=env, capture_output=True,
                               text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return "killed"          # a mutant that makes the tests hang is noticed too
        if r.returncode == 5:        # no test selected: a broken selection, not a kill
            raise RuntimeError(f"no tests selected for {m.label()}: {' '.join(m.tests)}")
        return "killed" if r.returncode != 0 else "survived"
    finally:
        path.write_text(original)
        if m.path.startswith("firmware"):      # objects back to the unmutated sources
            build_objects(tree, kernel_sources(tree, path))


def baseline(tree: Path, mutants: list[Mutant], timeout: float) -> list[str]:
    """Run every test selection on the unmutated tree (one run per test file); the failing files."""
    by_file: dict[str, list[str] | None] = {}
    for m in mutants:
        k = m.tests[m.tests.index("-k") + 1] if "-k" in m.tests else None
        if m.tests[0] in by_file and by_file[m.tests[0]] is None:
            continue
        by_file[m.tests[0]] = None if k is None else [*(by_file.get(m.tests[0]) or []), f"({k})"]
    env = dict(os.environ, PYTHONPATH=str(tree), PYTHONDONTWRITEBYTECODE="1",
               FW_KERNELS_LIB=str(tree / "libfw_kernels.so"))
    bad = []
    for f, ks in by_file.items():
        sel = [f] if ks is None else [f, "-k", " or ".join(sorted(set(ks)))]
        r = subprocess.run([sys.executable, *PYTEST, *sel], cwd=tree, env=env, capture_output=True, text=True,
                           timeout=timeout * 4)
        log.info("baseline %s: %s", f, "pass" if r.returncode == 0 else f"FAIL ({r.returncode})")
        if r.returncode != 0:
            bad.append(f)
    return bad


def _sigterm(signum: int, frame: object) -> None:
    raise KeyboardInterrupt   # so the temporary tree is removed on `kill` too


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _sigterm)
    ap = argparse.ArgumentParser(description="Mutation check over firmware/kernels and aot passes")
    ap.add_argument("--max", type=int, default=40, help="kernel mutants sampled (default 40; all pass mutants run)")
    ap.add_argument("--seed", type=int, default=20, help="sampling seed")
    ap.add_argument("--only", choices=["kernels", "passes"], help="one group only")
    ap.add_argument("--goal", type=float, default=0.9, help="killed fraction to reach (default 0.9)")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per mutant's tests")
    ap.add_argument("--list", action="store_true", help="list the selected mutants and stop")
    ap.add_argument("--filter", metavar="TEXT", help="only the mutants whose label (path:line kind) contains TEXT")
    ap.add_argument("--no-baseline", action="store_true", help="skip running the selections on the unmutated tree")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.max < 0:
        ap.error("--max must be >= 0")
    mutants: list[Mutant] = []
    if args.only != "passes":
        pool = kernel_mutants(REPO)
        random.Random(args.seed).shuffle(pool)
        # One mutant per (file, kind) first, so every kernel and every kind of fault is tried.
        seen: set[tuple[str, str]] = set()
        first = [m for m in pool if (m.path, m.kind) not in seen and not seen.add((m.path, m.kind))]  # type: ignore[func-returns-value]
        rest = [m for m in pool if m not in first]
        mutants += (first + rest)[: args.max]
    if args.only != "kernels":
        mutants += pass_mutants(REPO)
    if args.filter:
        mutants = [m for m in (kernel_mutants(REPO) if args.only != "passes" else []) + pass_mutants(REPO)
                   if args.filter in m.label()]
    if args.list:
        for m in mutants:
            print(f"{m.label()}: {m.new.strip()[:100]}")
        return 0
    results: dict[str, list[Mutant]] = {"killed": [], "survived": [], "stillborn": []}
    start = time.monotonic()
    try:
        with tempfile.TemporaryDirectory(prefix="mutation_") as tmp:
            tree = Path(tmp)
            copy_tree(tree)
            if not build_objects(tree, sorted((tree / KERNELS).glob("*.c"))):
                print("error: the unmutated kernels do not build on the host", file=sys.stderr)
                return 1
            link_library(tree)
            if not args.no_baseline:
                bad = baseline(tree, mutants, args.timeout)
                if bad:
                    print(f"error: the unmutated tree fails {', '.join(bad)}: fix that first", file=sys.stderr)
                    return 1
            for k, m in enumerate(mutants, 1):
                t0 = time.monotonic()
                res = run_mutant(tree, m, args.timeout)
                results[res].append(m)
                log.info("[%d/%d] %-9s %s (%.0f s): %s", k, len(mutants), res, m.label(), time.monotonic() - t0,
                         m.new.strip()[:90])
    except KeyboardInterrupt:
        print("interrupted (the working tree was never modified)", file=sys.stderr)
        return 130
    killed, survived = len(results["killed"]), len(results["survived"])
    total = killed + survived
    rate = killed / total if total else 0.0
    print(f"mutation check: {killed}/{total} killed ({100 * rate:.1f}%), {len(results['stillborn'])} stillborn, "
          f"{time.monotonic() - start:.0f} s")
    for m in results["survived"]:
        print(f"  survived: {m.label()}: {m.new.strip()[:120]}")
    return 0 if rate >= args.goal else 1


if __name__ == "__main__":
    sys.exit(main())
