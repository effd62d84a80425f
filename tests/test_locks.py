"""The build-folder lock (emlkit/locks.py): a second process waits while the first holds it, and the lock
is gone when its holder is killed."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from emlkit.locks import held

_CHILD = """
import sys
from pathlib import Path
from emlkit.locks import held
with held(Path(sys.argv[1])):
    Path(sys.argv[2]).write_text("in")
"""


def _start_child(folder: Path, mark: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", _CHILD, str(folder), str(mark)])


def test_a_second_process_waits_for_the_lock(tmp_path: Path) -> None:
    folder, mark = tmp_path / "build-x", tmp_path / "mark"
    with held(folder):
        child = _start_child(folder, mark)
        time.sleep(1.0)
        assert not mark.exists(), "the child entered while the lock was held"
    assert child.wait(timeout=30) == 0
    assert mark.read_text() == "in"
    assert (tmp_path / "build-x.lock").is_file() and not folder.exists()  # the lock sits beside the folder


def test_a_killed_holder_leaves_no_stale_lock(tmp_path: Path) -> None:
    folder, mark = tmp_path / "build-y", tmp_path / "mark"
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\nfrom pathlib import Path\n"
                               "from emlkit.locks import held\nwith held(Path(sys.argv[1])):\n"
                               "    print('held', flush=True); time.sleep(60)\n", str(folder)],
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    holder.kill()
    holder.wait(timeout=30)
    child = _start_child(folder, mark)
    assert child.wait(timeout=30) == 0 and mark.read_text() == "in"
