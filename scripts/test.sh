#!/usr/bin/env bash
# The README's test command: set-up, then the pytest suite without the cases
# marked slow, then the quick baremetal suite. CI runs exactly this (a 2-core
# machine, 45 minutes). `./scripts/test.sh --slow` also runs the slow cases
# (whole mobilenet_v2 and the larger zoo models on every target: about an hour
# more on 2 cores). Other arguments go to pytest.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
./scripts/setup.sh   # also installs this checkout as the emlkit package: no PYTHONPATH needed
PY="$ROOT/.venv/bin/python"

run_pytest() {
  # pytest exits 5 when nothing was collected: that is a failure here, not a pass.
  local rc=0
  "$PY" -m pytest "$@" || rc=$?
  if [ "$rc" -eq 5 ]; then echo "error: pytest ran no tests ($*)" >&2; exit 1; fi
  return "$rc"
}

# One pytest worker per core (EMLKIT_TEST_WORKERS=N to choose; 0 runs in this process). A test file stays
# on one worker (--dist loadfile): its module fixtures are built once, and the builds and compiled programs
# that files share are cached on disk behind locks (emlkit/locks.py), so a second worker reuses them.
WORKERS="${EMLKIT_TEST_WORKERS:-auto}"
# Files go to the workers in tests/conftest.py's order (longest first), not xdist's (most tests first).
XDIST=(-n "$WORKERS" --dist loadfile --no-loadscope-reorder)
if [ "$WORKERS" = "0" ]; then XDIST=(); fi

SLOW=0
if [ "${1:-}" = "--slow" ]; then SLOW=1; shift; fi
run_pytest "${XDIST[@]}" -m "not slow" -q --durations=25 "$@"
if [ "$SLOW" -eq 1 ]; then run_pytest "${XDIST[@]}" -m "slow" -q "$@"; fi
# The quick suite compiles into the tests' program cache: the programs pytest compiled (same options, same
# cache key) are reused, not compiled again.
./test_cortex_m.sh --quick --programs "${AOT_TEST_CACHE:-$ROOT/build/test-programs}"
