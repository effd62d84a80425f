#!/usr/bin/env bash
# The baremetal suite: every zoo model x target x board compiled, run on the
# simulator (QEMU mps3-an547 by default, an Arm FVP when one is on PATH),
# checked against the expected and the float outputs, and tabulated.
# Sets itself up on a fresh machine. Options: see --help.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
"$ROOT/scripts/setup.sh"   # installs this checkout as the emlkit package
exec "$ROOT/.venv/bin/emlkit" suite "$@"
