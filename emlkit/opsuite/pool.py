"""`--jobs` long-lived worker processes (emlkit/opsuite/worker.py), each case with a wall-clock timeout.

A worker is its own process group: a case over its time, or a worker that dies (a crash inside torch or a
tool), costs that case only: the group is killed, the case recorded, a fresh worker takes the next one."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, TextIO

from emlkit.errors import EXIT_INTERNAL, EXIT_TIMEOUT

RECYCLE_AFTER = 40   # jobs per worker process before a fresh one (compiles leave memory behind)


class _Worker:
    def __init__(self, log: TextIO) -> None:
        root = Path(__file__).resolve().parents[2]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
        self.proc = subprocess.Popen([sys.executable, "-m", "emlkit.opsuite.worker"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=log, text=True, env=env, start_new_session=True)
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.done = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def ask(self, job: dict[str, Any], timeout: float) -> dict[str, Any]:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(job) + "\n")
            self.proc.stdin.flush()
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            self.kill()
            return {"exit": EXIT_TIMEOUT, "line": f"case timeout: stopped after {timeout:g} s (compile + run)",
                    "seconds": timeout}
        except OSError:
            line = None
        self.done += 1
        if line is None:
            code = self.proc.wait()
            why = f"signal {-code}" if code < 0 else f"status {code}"
            return {"exit": EXIT_INTERNAL, "line": f"internal error: the worker process died ({why})"}
        return json.loads(line)

    def kill(self) -> None:
        """End this worker's process group (the worker and the simulator or tools it started)."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait()

    def close(self) -> None:
        if self.proc.stdin is not None and self.proc.poll() is None:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.kill()


def run_jobs(jobs: list[dict[str, Any]], n_workers: int, timeout: float, log_dir: Path,
             done: Callable[[dict[str, Any], dict[str, Any]], None]) -> None:
    """Run every job; `done(job, record)` is called (from one thread at a time) as each one ends.
    On KeyboardInterrupt every worker's process group is killed before it propagates."""
    todo: queue.Queue[dict[str, Any]] = queue.Queue()
    for j in jobs:
        todo.put(j)
    lock = threading.Lock()
    workers: list[_Worker] = []
    stop = threading.Event()
    log_dir.mkdir(parents=True, exist_ok=True)

    def serve(slot: int) -> None:
        with open(log_dir / f"worker-{slot}.log", "a") as log:
            w: _Worker | None = None
            while not stop.is_set():
                try:
                    job = todo.get_nowait()
                except queue.Empty:
                    break
                if w is None or w.proc.poll() is not None or w.done >= RECYCLE_AFTER:
                    if w is not None:
                        w.close()
                    w = _Worker(log)
                    with lock:
                        workers.append(w)
                rec = w.ask(job, timeout)
                if stop.is_set():
                    break
                with lock:
                    done(job, rec)
            if w is not None:
                w.close()

    threads = [threading.Thread(target=serve, args=(i,), daemon=True) for i in range(max(1, n_workers))]
    for t in threads:
        t.start()
    try:
        while any(t.is_alive() for t in threads):
            time.sleep(0.2)
    except KeyboardInterrupt:
        stop.set()
        with lock:
            for w in workers:
                w.kill()
        raise
