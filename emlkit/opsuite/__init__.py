"""`emlkit opsuite`: ExecuTorch's backend operator suite run through our pipeline, as a yardstick.

capture.py + plugin.py collect the suite's cases (pytest over its operators/ folder with our TestFlows);
run.py plans this shard's case x flow rows and hands them to worker processes (pool.py, worker.py);
classify.py gives each row its status; report.py merges shard files and writes the results page.
Only argument parsing here (the CLI builds its parser without importing torch).
"""

from __future__ import annotations

import argparse

DEFAULT_TARGETS = "cortex-m55,cortex-m4,ethos-u55-128,ethos-u85-256"


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:  # type: ignore[type-arg]
    o = sub.add_parser("opsuite", help="ExecuTorch's backend operator suite through compile + QEMU, per target "
                                       "(`emlkit opsuite merge` joins shard files and writes the results page)",
                       description="Capture the cases of ExecuTorch's operator suite, compile each for every target, "
                                   "run it on the target's board under QEMU, classify it and write "
                                   "OUT/opsuite-K-of-N.json. Rows are case x flow; --shard splits the cases.")
    o.add_argument("--targets", default=DEFAULT_TARGETS, help=f"comma-separated targets (default {DEFAULT_TARGETS})")
    o.add_argument("--allow-float", action="store_true", help="compile with --allow-float (float islands allowed)")
    o.add_argument("--cases", choices=["first", "all"], default="first",
                   help="first (default): one case per operator file, its first *_dtype case or else its first "
                        "case; all: every case")
    o.add_argument("-k", metavar="REGEX", default=None, help="only cases whose id matches REGEX (re.search), e.g. "
                                                            "'test_relu|test_add'; anchored as '^test_relu\\.py', "
                                                            "only the files it can match are captured (seconds)")
    o.add_argument("--shard", default="1/1", metavar="K/N", help="every N-th case (with all its flows) from the K-th "
                                                                 "(1-based) after a stable sort (default 1/1)")
    o.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    o.add_argument("--timeout", type=float, default=900.0, help="per case, compile + run, in seconds (default 900)")
    o.add_argument("--out", default="out/opsuite", help="output folder (default out/opsuite)")
    o.set_defaults(func=cmd_opsuite)
    msub = o.add_subparsers(dest="opsuite_cmd", required=False, metavar="merge")
    m = msub.add_parser("merge", help="merge shard files into one results.json (and the results page)")
    m.add_argument("shards", nargs="+", help="opsuite-K-of-N.json files")
    m.add_argument("-o", "--output", required=True, help="merged results (JSON)")
    m.add_argument("--docs", metavar="MD", help="also write the results page here (e.g. docs/opsuite.md)")
    m.set_defaults(func=cmd_merge)
    return o


def cmd_opsuite(args: argparse.Namespace) -> int:
    from emlkit.opsuite.run import run

    return run(args)


def cmd_merge(args: argparse.Namespace) -> int:
    from emlkit.opsuite.report import main

    return main(args)
