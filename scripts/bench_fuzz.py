#!/usr/bin/env python3
"""Fuzz the firmware's parsers for a bounded time and report executions and crashes.

    .venv/bin/python scripts/bench_fuzz.py --target loader|ethosu --seconds 60 [--seeds DIR] [--jobs 1]

Targets (firmware/fuzz/): `loader` (bundled-program and program verification, method construction,
delegate set-up, one execution) and `ethosu` (the Ethos-U delegate-data parser and command-stream
checker on raw delegate bytes). Builds the target with clang's libFuzzer + ASan + UBSan into build/fuzz/
(installs the Debian `clang` package if missing), seeds the corpus with programs compiled on the fly
(or --seeds; tests/fuzz_seeds/ holds the committed seeds), runs libFuzzer for --seconds, and prints one
JSON line: {"target": ..., "execs": N, "crashes": K, ...}. Exit status 0 when no crash was found, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FW = REPO / "firmware"
OUT = REPO / "build" / "fuzz"
log = logging.getLogger("bench_fuzz")


def ensure_clang() -> str:
    clang = shutil.which("clang")
    if clang:
        return clang
    log.info("clang not found: installing the Debian package")
    sudo = [] if shutil.os.geteuid() == 0 else ["sudo"]
    subprocess.run(sudo + ["apt-get", "install", "-y", "-qq", "clang"], check=True)
    clang = shutil.which("clang")
    if not clang:
        raise SystemExit("clang still missing after apt-get install clang; install it and retry")
    return clang


TARGET_SOURCES = {"loader": ("runtime", "ops", "kernels", "npu"), "ethosu": ("npu",)}


def build(clang: str, target: str = "loader") -> Path:
    OUT.mkdir(parents=True, exist_ok=True)
    exe = OUT / f"fuzz_{target}"
    srcs = sorted(str(p) for d in TARGET_SOURCES[target] for p in (FW / d).glob("*.c"))
    if target == "ethosu":
        srcs += [str(FW / "runtime" / "status.c"), str(FW / "runtime" / "et_fmt.c")]  # messages: et_snprintf
    srcs.append(str(FW / "fuzz" / f"fuzz_{target}.c"))
    newest = max(Path(s).stat().st_mtime for s in srcs + [str(p) for p in FW.rglob("*.[hd]*")])
    if exe.exists() and exe.stat().st_mtime > newest:
        return exe
    cmd = [clang, "-std=c11", "-O1", "-g", "-fsanitize=fuzzer,address,undefined", "-fno-sanitize-recover=all",
           "-fno-omit-frame-pointer", f"-I{FW / 'runtime'}", f"-I{FW / 'ops'}", f"-I{FW / 'kernels'}",
           f"-I{FW / 'platform'}", f"-I{FW / 'npu'}", *srcs, "-lm", "-o", str(exe)]
    log.info("building %s", exe)
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"fuzzer build failed:\n{p.stderr[-4000:]}")
    return exe


def make_seeds(dest: Path) -> None:
    """Two small bundled programs: float ops with constants in a segment, and a plain .pte."""
    import torch
    from executorch.devtools import BundledProgram
    from executorch.devtools.bundled_program.config import MethodTestCase, MethodTestSuite
    from executorch.devtools.bundled_program.serialize import serialize_from_bundled_program_to_flatbuffer
    from executorch.exir import to_edge

    class M(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(3, 4))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = torch.cat([x * self.w, x], dim=0)[1:4].permute(1, 0)
            return torch.softmax(torch.relu(y + 1.0), dim=-1).mean(dim=0, keepdim=True)

    x = (torch.randn(3, 4),)
    m = M().eval()
    et = to_edge(torch.export.export(m, x, strict=True)).to_executorch()
    with torch.no_grad():
        bp = BundledProgram(et, [MethodTestSuite("forward", [MethodTestCase(inputs=x, expected_outputs=(m(*x),))])])
    (dest / "seed_float.bpte").write_bytes(serialize_from_bundled_program_to_flatbuffer(bp))
    (dest / "seed_float.pte").write_bytes(et.buffer)
    # and a quantized program with an Ethos-U delegate (the loader reaches the delegate parser through it)
    from emlkit.compile import compile_model, make_options

    res = compile_model("conv_relu", "ethos-u55-128", REPO / "build" / "fuzz-seeds", options=make_options(), reuse_cache=True)
    (dest / "seed_ethosu.bpte").write_bytes(res.bpte.read_bytes())


def make_ethosu_seeds(dest: Path) -> None:
    """The delegate data of small zoo programs for the Ethos-U55, U65 and U85 (compiled, cached in build/)."""
    from executorch.exir._serialize._program import deserialize_pte_binary

    from emlkit.compile import compile_model, make_options

    for model, target in (("conv_relu", "ethos-u55-128"), ("lut_activations", "ethos-u65-256"),
                          ("attention", "ethos-u85-256"), ("pool", "ethos-u85-256")):
        res = compile_model(model, target, REPO / "build" / "fuzz-seeds", options=make_options(), reuse_cache=True)
        prog = deserialize_pte_binary(res.pte.read_bytes()).program
        for i, d in enumerate(prog.backend_delegate_data):
            (dest / f"{model}_{target}_{i}.bin").write_bytes(bytes(d.data))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="bounded libFuzzer run of the firmware's parsers")
    ap.add_argument("--target", choices=sorted(TARGET_SOURCES), default="loader")
    ap.add_argument("--seconds", type=int, default=60)
    ap.add_argument("--seeds", type=Path, help="directory of seed files (default: tests/fuzz_seeds/TARGET, the committed "
                                               "corpus, or freshly generated seeds with --fresh-seeds)")
    ap.add_argument("--fresh-seeds", action="store_true", help="compile new seed programs instead of the committed ones")
    ap.add_argument("--jobs", type=int, default=1, help="parallel fuzzing processes (the machine has 2 cores)")
    ap.add_argument("--seed", type=int, help="libFuzzer's random seed (repeatable runs, e.g. in CI)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="[bench_fuzz] %(message)s")
    exe = build(ensure_clang(), args.target)
    artifacts = OUT / "artifacts"
    artifacts.mkdir(exist_ok=True)
    before = set(artifacts.glob("*"))
    with tempfile.TemporaryDirectory() as corpus_dir:
        corpus = Path(corpus_dir)
        seeds = args.seeds or (None if args.fresh_seeds else REPO / "tests" / "fuzz_seeds" / args.target)
        if seeds is not None and not seeds.is_dir():
            raise SystemExit(f"error: seed folder {seeds} not found")
        if seeds is not None:
            for f in seeds.iterdir():
                if f.is_file():
                    shutil.copy(f, corpus / f.name)
        elif args.target == "ethosu":
            make_ethosu_seeds(corpus)
        else:
            make_seeds(corpus)
        cmd = [str(exe), str(corpus), f"-max_total_time={args.seconds}", "-print_final_stats=1", "-timeout=10",
               "-rss_limit_mb=2048", f"-artifact_prefix={artifacts}/", "-max_len=1048576"]
        if args.jobs > 1:
            cmd += [f"-jobs={args.jobs}", f"-workers={args.jobs}"]
        if args.seed is not None:
            cmd.append(f"-seed={args.seed}")
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.seconds * 3 + 120)
        text = p.stderr + p.stdout
        if args.jobs > 1:
            for f in Path.cwd().glob("fuzz-*.log"):
                text += f.read_text()
                f.unlink()
    execs = sum(int(x) for x in re.findall(r"stat::number_of_executed_units:\s*(\d+)", text))
    cov = re.findall(r"\bcov: (\d+)", text)
    crashes = sorted(str(f) for f in set(artifacts.glob("*")) - before)
    report = {"target": args.target, "seconds": args.seconds, "execs": execs, "execs_per_s": round(execs / max(args.seconds, 1)),
              "coverage_edges": int(cov[-1]) if cov else None, "crashes": len(crashes), "crash_files": crashes,
              "fuzzer_exit": p.returncode}
    print(json.dumps(report))
    if crashes:
        log.error("crash inputs saved; reproduce with: %s FILE", exe)
    return 1 if crashes or p.returncode not in (0,) else 0


if __name__ == "__main__":
    sys.exit(main())
