"""`emlkit opsuite`: capture ExecuTorch's operator-suite cases, run this shard's case x flow rows through our
pipeline in worker processes, classify them and write DIR/opsuite-K-of-N.json."""

from __future__ import annotations

import json
import logging
import os
import re
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from emlkit.errors import AotError
from emlkit.opsuite import plugin
from emlkit.opsuite.classify import SNR_FLOOR_DB, classify, classify_etref

log = logging.getLogger("emlkit.opsuite")

ETREF_FLOW = "executorch_cortex_m"   # ExecuTorch's own Cortex-M flow, compile only
SCHEMA = 1


@dataclass
class Case:
    record: plugin.Record     # the first flow's capture (every flow captures the same seeded case)

    @property
    def id(self) -> str:
        return self.record.case_id

    @property
    def five_d(self) -> bool:
        return any(getattr(t, "dim", lambda: 0)() == 5 for t in _tensors(self.record.inputs))

    @property
    def stem(self) -> str:
        r = self.record
        return re.sub(r"[^A-Za-z0-9_]+", "_", f"{r.file[:-3]}-{r.test}") + (f"-{r.subtest}" if r.subtest else "")


def _tensors(obj: Any) -> list[Any]:
    if isinstance(obj, (tuple, list)):
        return [t for o in obj for t in _tensors(o)]
    return [obj] if hasattr(obj, "dim") else []


def parse_shard(text: str) -> tuple[int, int]:
    m = re.fullmatch(r"(\d+)/(\d+)", text.strip())
    k, n = (int(m.group(1)), int(m.group(2))) if m else (0, 0)
    if not m or n < 1 or not 1 <= k <= n:
        raise AotError(f"bad --shard '{text}': give K/N with 1 <= K <= N (e.g. 1/4: every 4th case from the first)")
    return k, n


def shard_name(k: int, n: int) -> str:
    return f"opsuite-{k}-of-{n}.json"


def group_cases(records: list[plugin.Record]) -> list[Case]:
    seen: dict[str, Case] = {}
    for r in records:
        seen.setdefault(r.case_id, Case(r))
    return list(seen.values())


def select(cases: list[Case], mode: str, pattern: str | None) -> list[Case]:
    """`first`: per operator file the first `*_dtype` case (else its first case); `all`: every case. Then -k."""
    if mode == "first":
        by_file: dict[str, list[Case]] = {}
        for c in cases:
            by_file.setdefault(c.record.file, []).append(c)
        cases = [next((c for c in cs if c.record.test.split("[")[0].endswith("_dtype")), cs[0])
                 for cs in by_file.values()]
    if pattern:
        rx = compile_k(pattern)
        assert rx is not None
        cases = [c for c in cases if rx.search(c.id)]
        if not cases:
            raise AotError(f"no case of ExecuTorch's operator suite matches -k '{pattern}' (case ids look like "
                           "test_relu.py::test_relu_dtype[float32])")
    return cases


def compile_k(pattern: str | None) -> re.Pattern[str] | None:
    """-k as a regular expression, checked before the capture (a minute) rather than after it."""
    if pattern is None:
        return None
    try:
        return re.compile(pattern)
    except re.error as err:
        raise AotError(f"bad -k regular expression '{pattern}': {err}") from None


def files_for_k(pattern: str | None, files: list[str]) -> list[str] | None:
    """The operator files a -k anchored with a literal head (`^test_relu\\.py`) can match, so only they are
    captured; None (capture every file) when the pattern has no such head. Sound: a case id is
    `FILE::TEST...`, so an id matching `^LIT` starts with LIT."""
    if not pattern or not pattern.startswith("^") or "|" in pattern:   # `^a|b`: b may match anywhere
        return None
    lit: list[str] = []
    i = 1
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern) and not pattern[i + 1].isalnum():
            lit.append(pattern[i + 1])   # an escaped punctuation mark is itself (\. is a dot)
            i += 2
            continue
        if ch in ".^$*+?{}[]()|\\":
            # a quantifier makes the character before it optional: it is not part of the head
            if ch in "*?{" and lit:
                lit.pop()
            break
        lit.append(ch)
        i += 1
    head = "".join(lit)
    if not head:
        return None
    return [f for f in files if (f + "::").startswith(head) or head.startswith(f + "::")]


def plan(cases: list[Case], flows: list[str], k: int, n: int) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """Every (case id, flow) row, and this shard's: the rows of every N-th case from the K-th after a stable
    sort (a case's flows stay together, so shards take alike shares of the slow flows)."""
    ids = sorted(c.id for c in cases)
    return [(c, f) for c in ids for f in flows], [(c, f) for c in ids[k - 1::n] for f in flows]


def _write_case(case: Case, folder: Path) -> Path:
    """The case as a .pt file (load.py reads it); a model whose class is local to its test function cannot be
    pickled, so that case gets a .py model file that captures it again (the same seed gives the same case)."""
    import pickle

    import torch

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{case.stem}.pt"
    tmp = path.with_suffix(".tmp")
    r = case.record
    try:
        torch.save({"ModelUnderTest": r.model, "ModelInputs": r.inputs}, tmp)
        tmp.replace(path)
        return path
    except (pickle.PicklingError, AttributeError, TypeError):
        tmp.unlink(missing_ok=True)
    path = folder / f"{case.stem}.py"
    path.write_text(f'"""emlkit opsuite case {r.case_id}: its model class is local to the test function, so it cannot '
                    'be pickled;\nthis file captures the case again with the suite (the same seed gives the same '
                    'case)."""\nfrom emlkit.opsuite.capture import recapture\n\n'
                    f"ModelUnderTest, ModelInputs = recapture({r.file!r}, {r.test!r}, {r.subtest})\n")
    return path


def _prebuild(targets: list[str]) -> None:
    """Each default board's image (and its QEMU stand-in's) once, before workers race for it."""
    from emlkit.deploy.boards import load_board
    from emlkit.deploy.execute import prebuild, stand_in_for
    from emlkit.targets import get_target

    boards = {get_target(t).default_board for t in targets}
    for b in sorted(boards):
        alt = stand_in_for(load_board(b)) if load_board(b).qemu is None else None
        for name in [b] + ([alt.name] if alt is not None else []):
            try:
                prebuild(name)
            except AotError as err:
                log.warning("warning: board %s does not build: %s", name, err)


def _fixed_row(case: Case) -> dict[str, Any] | None:
    """Rows decided without compiling: suite cases PyTorch cannot run, and 5-D cases."""
    if case.record.invalid:
        return {"status": "INVALID", "reason": f"suite case invalid: eager PyTorch raises {case.record.invalid}"}
    if case.five_d:
        return {"status": "NOT_APPLICABLE", "reason": "not applicable: 5-D"}
    return None


def _skipped(sink: plugin.Sink) -> dict[str, str]:
    """Tests the suite itself skips (unittest.skip: NaN/Inf edge cases, in-place ops), by test, with the reason."""
    out = {}
    for nodeid, outcome in sink.outcomes.items():
        if outcome.startswith("skipped"):
            out[re.sub(r"-?emlkit_[a-z0-9_]+-?|\[\]", "", nodeid).replace("[]", "")] = outcome.split(": ", 1)[-1]
    return dict(sorted(out.items()))


def run(args: Any) -> int:
    from emlkit.opsuite.capture import capture, operators_dir
    from emlkit.opsuite.pool import run_jobs
    from emlkit.targets import get_target

    targets = [get_target(t.strip()).name for t in args.targets.split(",") if t.strip()]
    if not targets:
        raise AotError("--targets names no target")
    k, n = parse_shard(args.shard)
    if args.jobs < 1:
        raise AotError(f"--jobs must be at least 1, got {args.jobs}")
    out = Path(args.out)
    compile_k(args.k)
    files = files_for_k(args.k, sorted(p.name for p in operators_dir().glob("test_*.py")))
    if files == []:
        select([], args.cases, args.k)   # says that no case matches
    t0 = time.monotonic()
    sink = capture(targets, files)
    all_cases = group_cases(sink.records)
    cases = select(all_cases, args.cases, args.k)
    flows = [plugin.flow_name(t) for t in targets] + [ETREF_FLOW]
    target_of = {plugin.flow_name(t): t for t in targets}
    all_rows, mine = plan(cases, flows, k, n)
    print(f"opsuite: {len(all_cases)} cases from {len({c.record.file for c in all_cases})} operator files captured "
          f"in {time.monotonic() - t0:.0f}s; {len(cases)} selected ({args.cases}), {len(all_rows)} rows, "
          f"shard {k}/{n}: {len(mine)} rows", flush=True)
    by_id = {c.id: c for c in cases}
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    jobs: list[dict[str, Any]] = []
    files: dict[str, Path] = {}
    for cid, flow in mine:
        case, target = by_id[cid], target_of.get(flow)
        base = {"case": cid, "file": case.record.file, "flow": flow, "target": target}
        fixed = _fixed_row(case)
        if fixed is not None:
            rows[(cid, flow)] = {**base, **fixed}
            continue
        if cid not in files:
            files[cid] = _write_case(case, out / "cases")
        jobs.append({**base, "kind": "etref" if target is None else "emlkit", "case_file": str(files[cid]),
                     "allow_float": args.allow_float, "sim_timeout": min(300.0, args.timeout),
                     "workdir": str(out / "work" / (target or ETREF_FLOW) / case.stem)})
    if any(j["kind"] == "emlkit" for j in jobs):
        _prebuild(targets)

    started = time.monotonic()

    def done(job: dict[str, Any], raw: dict[str, Any]) -> None:
        cls = classify(raw) if job["kind"] == "emlkit" else classify_etref(raw)
        row = {"case": job["case"], "file": job["file"], "flow": job["flow"], "target": job["target"], **cls}
        rows[(job["case"], job["flow"])] = row
        mark = " int8" if row.get("int8") else ""
        print(f"[{len(rows)}/{len(mine)} {time.monotonic() - started:5.0f}s] {row['status']}{mark} {job['flow']} "
              f"{job['case']} ({raw.get('seconds', 0)}s) {row.get('reason', '')[:140]}", flush=True)

    run_jobs(jobs, args.jobs, args.timeout, out / "logs", done)
    doc = {"schema": SCHEMA, "shard": [k, n], "targets": targets, "flows": flows, "allow_float": args.allow_float,
           "cases": args.cases, "k": args.k or "", "snr_floor_db": SNR_FLOOR_DB, "total_rows": len(all_rows),
           "row_keys": [list(r) for r in mine], "rows": [rows[r] for r in mine],
           "capture": {"operator_files": len({c.record.file for c in all_cases}), "cases": len(all_cases),
                       "skipped_by_suite": _skipped(sink)}}
    path = out / shard_name(k, n)
    out.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(doc, indent=1) + "\n")
    os.replace(tmp, path)   # a run stopped before this point leaves the previous shard file whole
    for flow in flows:
        counts = Counter(r["status"] + (" int8" if r.get("int8") else "") for r in doc["rows"] if r["flow"] == flow)
        print(f"{flow}: " + (", ".join(f"{v} {s}" for s, v in sorted(counts.items())) or "no rows in this shard"))
    print(f"opsuite: wrote {path}")
    return 0
