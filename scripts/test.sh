#!/usr/bin/env bash
# The README's test command: set-up, then the pytest suite (quick cases first,
# then the slow ones), then the quick baremetal suite. CI runs exactly this.
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

run_pytest -m "not slow" -q "$@"
run_pytest -m "slow" -q "$@"
./test_cortex_m.sh --quick
