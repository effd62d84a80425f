"""Mutation check: do the tests notice small wrong changes to the kernels and passes?

Each mutant is one small source change: in firmware/kernels (the code the host build compiles, not
the MVE/DSP branches): a loop bound off by one, a clamp dropped, a rounding term removed, a shift
one bit wrong, a saturation bound or an offset sign changed; in emlkit/ (passes and the verifier): a
wrong constant or a skipped rewrite/check (a curated list). The script copies the tree into one
temporary folder per job (-j) once, applies each change there (the working tree is never touched, so
Ctrl-C cannot leave a mutant behind), rebuilds only the mutated kernel's object (a header: all of
them) and runs only the tests that cover the file. Mutants are found by their text (the line and
which of its equal copies in the file), not by line number, so code that moves keeps its mutants.
A kernel file missing from KERNEL_TESTS is covered by the tests of the .c files that include it (a
header) or by every host kernel test (a .c); the arch-only headers (*_mve.h, *_dsp.h) are skipped.

- killed: the tests failed (or the build did);
- survived: they passed (a gap worth a test);
- stillborn: a kernel mutant that does not compile, or a mutation whose text is no longer in the
  source (not counted).

Usage:
  python -m scripts.mutation_check [--max N] [--seed S] [--only kernels|passes] [--filter TEXT] [--list]
                                   [--timeout SEC] [--no-baseline] [-j JOBS]
Exit status: 0 when killed/total >= --goal (default 0.9), 1 below it, 2 for bad arguments,
130 when interrupted.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import logging
import queue
import threading
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
COPY = ("emlkit", "firmware", "boards", "tests", "scripts", "pytest.ini")
PYTEST = ["-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "--no-header"]

# Which tests cover which kernel source (tests/test_kernels.py; the header is in every kernel).
KERNEL_TESTS: dict[str, str] = {
    "minmax.c": "test_minimum_maximum",
    "pad.c": "test_pad",
    "quantize_f32.c": "test_quantize_dequantize",
    "lut_s8.c": "test_quantized_activation",
    "add_s8.c": "test_quantized_add",
    "avg_pool2d_s8.c": "test_quantized_avg_pool2d",
    "batch_matmul_s8.c": "test_quantized_batch_matmul",
    "conv2d_s8.c": "test_quantized_conv2d or test_scratch_sizes",
    "conv2d_s8_ref.c": "test_quantized_conv2d",
    "conv2d_s8_mve.c": "test_quantized_conv2d",
    "conv2d_s8_dsp.c": "test_quantized_conv2d",
    "conv2d_s8.h": "test_quantized_conv2d or test_scratch_sizes",
    "depthwise_conv2d_s8.c": "test_quantized_depthwise or test_scratch_sizes",
    "depthwise_conv2d_s8_ref.c": "test_quantized_depthwise",
    "depthwise_conv2d_s8_mve.c": "test_quantized_depthwise",
    "depthwise_conv2d_s8_dsp.c": "test_quantized_depthwise",
    "depthwise_conv2d_s8.h": "test_quantized_depthwise or test_scratch_sizes",
    "div.c": "test_quantized_div",
    "linear_s8.c": "test_quantized_linear",
    "max_pool2d_s8.c": "test_quantized_max_pool2d",
    "mul_s8.c": "test_quantized_mul or test_requantize",
    "transpose_conv2d_s8.c": "test_quantized_transpose",
    "softmax_s8.c": "test_softmax",
    "transpose.c": "test_transpose",
    "emlkit_softmax_s8.c": "test_emlkit_softmax",
    "emlkit_masked_softmax_s8.c": "test_emlkit_masked_softmax",
    "emlkit_log_softmax_s8.c": "test_emlkit_log_softmax or test_log2_q20",
    "emlkit_avg_pool2d_s8.c": "test_emlkit_avg_pool2d",
    "emlkit_resize_bilinear_s8.c": "test_emlkit_resize_bilinear",
    "emlkit_prelu_s8.c": "test_emlkit_prelu",
    "emlkit_adaptive_avg_pool2d_s8.c": "test_emlkit_adaptive_avg_pool2d",
    "emlkit_floor_divide_s8.c": "test_emlkit_floor_divide",
    "emlkit_embedding_bag_s8.c": "test_emlkit_embedding_bag",
    "emlkit_lstm_s8.c": "test_emlkit_lstm or test_emlkit_gru",
    "kernels.h": "test_requantize or test_quantized_add or test_quantized_conv2d or test_quantized_max_pool2d",
}


# Every host kernel test (for a kernel source nobody has mapped yet).
ALL_KERNEL_TESTS = "test_ and not qemu and not compile_for"


@dataclass
class Mutant:
    path: str          # relative to the repo
    line: int          # 1-based, for the report only
    old: str           # the line as it is (kernels) or the text to replace (passes)
    new: str           # the same, mutated
    kind: str
    tests: list[str]   # pytest arguments
    nth: int = 0       # which of the equal copies of `old` in the file (kernels)

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
    ("avg_pool2d_s8.c", ": (int8_t)k_clamp(zp, -128, 127);"):
        "count > 0 always: padding is at most half the kernel, so every window holds an input element",
}


# Mutated texts that cannot change any result: in `r > 127 ? 127 : r` moving the bound by one
# changes only the branch taken at r == 127 (or -128), and both branches give the same value.
EQUIVALENT_NEW = re.compile(r"> 126 \? 127\b|< -127 \? -128\b")


def kernel_selection(root: Path, name: str) -> str | None:
    """The -k expression of the tests covering kernel file `name`; None: the host never compiles it."""
    if name in KERNEL_TESTS:
        return f"({KERNEL_TESTS[name]}) and not qemu and not compile_for"
    if Path(name).stem.endswith(("_mve", "_dsp")):
        return None
    if name.endswith(".c"):
        return ALL_KERNEL_TESTS
    # A new (e.g. shared) header: the tests of the mapped sources including it, else all.
    inc = re.compile(r'#include\s+"' + re.escape(name) + '"')
    users = sorted(f"({KERNEL_TESTS[c.name]})" for c in (root / KERNELS).glob("*.c")
                   if c.name in KERNEL_TESTS and inc.search(c.read_text()))
    return f"({' or '.join(users)}) and not qemu and not compile_for" if users else ALL_KERNEL_TESTS


def kernel_mutants(root: Path) -> list[Mutant]:
    out = []
    for path in sorted((root / KERNELS).glob("*.[ch]")):
        sel = kernel_selection(root, path.name)
        if sel is None:
            continue
        rel = str(path.relative_to(root))
        tests = ["tests/test_kernels.py", "-k", sel]
        seen: dict[str, int] = {}
        for no, line in host_lines(path.read_text()):
            nth = seen.get(line, 0)
            seen[line] = nth + 1
            if any(f == path.name and text in line for f, text in EQUIVALENT):
                continue
            new = None if "k_clamp(int32_t" in line else _drop_clamp(line)   # not the definition
            if new is not None and new != line:
                out.append(Mutant(rel, no, line, new, "clamp dropped", tests, nth))
            for kind, pat, rep in LINE_MUTATIONS:
                new = re.sub(pat, rep, line, count=1)
                if new != line and not EQUIVALENT_NEW.search(new):
                    out.append(Mutant(rel, no, line, new, kind, tests, nth))
    return out


# ---------------------------------------------------------------- pass mutants, curated
PASS_TESTS_FAST = ["tests/test_kernels.py", "-k", "test_scratch_sizes"]
# tests/passes/test_lut_fusion.py cases on small graphs (the zoo cases compile whole models: minutes).
LUT_FAST = ("single_op_chain or random_chains or internal_requantization or branch_stops or multi_input_op "
            "or only_the_table_op or round_half_away")
PASS_MUTANTS: list[tuple[str, str, str, str, list[str]]] = [
    # The compiler's scratch sizes are the kernels' own functions, asked through the host library's shim: a shim
    # that fills the kernel's parameters wrongly must fail the comparison with the kernels called directly.
    ("boards/host/query.c", "p.in_c = in_c, p.out_c = out_c,", "p.in_c = out_c, p.out_c = in_c,", "swap",
     PASS_TESTS_FAST),
    ("boards/host/query.c", "p.k_h = k_h, p.k_w = k_w, p.c = c;", "p.k_h = k_h, p.k_w = k_h, p.c = c;", "wrong variable",
     ["tests/test_kernels.py", "-k", "test_scratch_sizes or avgpool_scratch"]),
    ("emlkit/passes/lut_backends.py", "return torch.sign(x) * torch.floor(x.abs() + 0.5)",
     "return torch.round(x)", "rounding", ["tests/passes/test_lut_fusion.py", "-k", LUT_FAST]),
    ("emlkit/passes/lut_fusion.py", "    region.output_q.replace_all_uses_with(replacement)\n",
     "    pass\n", "skip a rewrite step",
     ["tests/passes/test_lut_fusion.py", "-k", LUT_FAST]),
    ("emlkit/passes/manager.py", "    if len(out) != len(decl):", "    if False:", "skip a check",
     ["tests/passes/test_manager.py"]),
    ("emlkit/passes/manager.py", "            if rank[decl[first][0]] > rank[decl[then][0]]:",
     "            if rank[decl[first][0]] > rank[decl[then][0]] + 1:", "wrong constant",
     ["tests/passes/test_manager.py"]),
    # compile's load check is the firmware's own (emlkit/hostfw.py): a mutant adapter check must fail it
    ("firmware/ops/cortex_m_softmax.c", "  if (ozp != -128)\n", "  if (ozp > 0)\n", "skip a check",
     ["tests/test_device_load_check.py", "-k", "name_the_node"]),
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


def apply(original: str, m: Mutant) -> str | None:
    """The mutated text, or None when the mutated text is no longer in the source (stillborn)."""
    if not m.path.startswith("firmware"):
        return original.replace(m.old, m.new, 1) if m.old in original else None
    lines = original.splitlines(keepends=True)
    hits = [i for i, line in enumerate(lines) if line.rstrip("\n") == m.old]
    if len(hits) <= m.nth:
        return None
    i = hits[m.nth]
    lines[i] = m.new + ("\n" if lines[i].endswith("\n") else "")
    return "".join(lines)


class Runner:
    """Runs mutants in prepared trees; tracks the running children so Ctrl-C can stop them."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.children: set[subprocess.Popen[str]] = set()

    def _run(self, cmd: list[str], **kw: object) -> tuple[int | None, str]:
        """Exit status (None on timeout) and output of cmd; its own process group so Ctrl-C reaches us first."""
        if self.stop.is_set():
            raise KeyboardInterrupt
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             start_new_session=True, **kw)  # type: ignore[call-overload]
        with self.lock:
            self.children.add(p)
        try:
            out, _ = p.communicate(timeout=self.timeout)
            return p.returncode, out
        except subprocess.TimeoutExpired:
            self._kill(p)
            p.communicate()
            return None, ""
        finally:
            with self.lock:
                self.children.discard(p)
            if self.stop.is_set():
                raise KeyboardInterrupt

    @staticmethod
    def _kill(p: subprocess.Popen[str]) -> None:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def kill_all(self) -> None:
        self.stop.set()
        with self.lock:
            for p in list(self.children):
                self._kill(p)

    def run_mutant(self, tree: Path, m: Mutant) -> str:
        path = tree / m.path
        original = path.read_text()
        mutated = apply(original, m)
        if mutated is None or mutated == original:
            return "stillborn"
        kernel = m.path.startswith("firmware")
        path.write_text(mutated)
        env = dict(os.environ, PYTHONPATH=str(tree), PYTHONDONTWRITEBYTECODE="1")
        try:
            if kernel:
                if not build_objects(tree, kernel_sources(tree, path)):
                    return "stillborn"
                env["FW_KERNELS_LIB"] = str(link_library(tree))
            rc, _ = self._run([sys.executable, *PYTEST, *m.tests], cwd=tree, env=env)
            if rc is None:
                return "killed"          # a mutant that makes the tests hang is noticed too
            if rc == 5:                  # no test selected: a broken selection, not a kill
                raise RuntimeError(f"no tests selected for {m.label()}: {' '.join(m.tests)}")
            return "killed" if rc != 0 else "survived"
        finally:
            path.write_text(original)
            if kernel:                   # objects back to the unmutated sources: copies, no rebuild
                for o in (tree / "objs.clean").glob("*.o"):
                    shutil.copy2(o, tree / "objs" / o.name)
                link_library(tree)


def prepare_tree(tree: Path) -> bool:
    """Copy the repo into `tree` and build the unmutated kernels (kept in objs.clean for restoring)."""
    copy_tree(tree)
    if not build_objects(tree, sorted((tree / KERNELS).glob("*.c"))):
        return False
    shutil.copytree(tree / "objs", tree / "objs.clean")
    link_library(tree)
    return True


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


def select_mutants(args: argparse.Namespace) -> list[Mutant]:
    """The mutants the arguments select: a sample of the kernel mutants and every pass mutant, or --filter's."""
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
    return mutants


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _sigterm)
    ap = argparse.ArgumentParser(description="Mutation check over firmware/kernels and emlkit passes")
    ap.add_argument("--max", type=int, default=40, help="kernel mutants sampled (default 40; all pass mutants run)")
    ap.add_argument("--seed", type=int, default=20, help="sampling seed")
    ap.add_argument("--only", choices=["kernels", "passes"], help="one group only")
    ap.add_argument("--goal", type=float, default=0.9, help="killed fraction to reach (default 0.9)")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per mutant's tests")
    ap.add_argument("--list", action="store_true", help="list the selected mutants and stop")
    ap.add_argument("--filter", metavar="TEXT", help="only the mutants whose label (path:line kind) contains TEXT")
    ap.add_argument("--no-baseline", action="store_true", help="skip running the selections on the unmutated tree")
    ap.add_argument("-j", "--jobs", type=int, default=2, help="mutants run at the same time (default 2)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.max < 0:
        ap.error("--max must be >= 0")
    if args.jobs < 1:
        ap.error("--jobs must be >= 1")
    mutants = select_mutants(args)
    if args.list:
        for m in mutants:
            print(f"{m.label()}: {m.new.strip()[:100]}")
        return 0
    results: dict[str, list[Mutant]] = {"killed": [], "survived": [], "stillborn": []}
    start = time.monotonic()
    runner = Runner(args.timeout)
    jobs = max(1, min(args.jobs, len(mutants)))
    pool_ex = concurrent.futures.ThreadPoolExecutor(max_workers=jobs)
    try:
        with tempfile.TemporaryDirectory(prefix="mutation_") as tmp:
            trees: queue.Queue[Path] = queue.Queue()
            for j in range(jobs):
                tree = Path(tmp) / f"t{j}"
                tree.mkdir()
                if not prepare_tree(tree):
                    print("error: the unmutated kernels do not build on the host", file=sys.stderr)
                    return 1
                trees.put(tree)
            if not args.no_baseline:
                bad = baseline(Path(tmp) / "t0", mutants, args.timeout)
                if bad:
                    print(f"error: the unmutated tree fails {', '.join(bad)}: fix that first", file=sys.stderr)
                    return 1

            def one(m: Mutant) -> tuple[Mutant, str, float]:
                tree = trees.get()
                t0 = time.monotonic()
                try:
                    return m, runner.run_mutant(tree, m), time.monotonic() - t0
                finally:
                    trees.put(tree)

            futures = [pool_ex.submit(one, m) for m in mutants]
            try:
                for k, fut in enumerate(concurrent.futures.as_completed(futures), 1):
                    m, res, took = fut.result()
                    results[res].append(m)
                    log.info("[%d/%d] %-9s %s (%.0f s): %s", k, len(mutants), res, m.label(), took,
                             m.new.strip()[:90])
            finally:
                # Ctrl-C or an error: stop the running tests before the trees are removed.
                for f in futures:
                    f.cancel()
                runner.kill_all()
                pool_ex.shutdown(wait=True)
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
