#!/usr/bin/env bash
# Idempotent set-up: Debian packages (toolchain, QEMU, flatbuffers) and a .venv
# with the pinned Python packages. A second run on a set-up machine takes seconds.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
STAMP="$VENV/.requirements.sha256"

APT_PACKAGES=(gcc-arm-none-eabi libnewlib-arm-none-eabi libstdc++-arm-none-eabi-newlib
              qemu-system-arm flatbuffers-compiler libflatbuffers-dev clang)

log() { echo "[setup] $*" >&2; }

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  log "installing Debian packages: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

want="$(sha256sum "$ROOT/requirements.txt" | cut -d' ' -f1)"
if [ ! -x "$VENV/bin/python" ]; then
  log "creating $VENV"
  python3 -m venv "$VENV"
fi
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$want" ]; then
  log "installing Python packages (torch first, so the CPU wheel is used)"
  # This machine's pip config names local indexes that may be absent; pip warns about each one.
  # --no-compile, then one compileall on every core: pip byte-compiles each package on one core (half the set-up).
  pip_q() { "$VENV/bin/pip" install -q --no-compile --disable-pip-version-check "$@" 2>&1 | { grep -v '^WARNING: Location' || true; }; }
  pip_q "$(grep '^torch==' "$ROOT/requirements.txt")"
  pip_q -r "$ROOT/requirements.txt"
  # Left out: the packages' own test folders (29% of the files; ExecuTorch's backend test suite, which the
  # opsuite imports, is not one of them; some hold test data that is not valid Python), and trees no flow, test
  # or the opsuite's flow list imports (pip, setuptools, ExecuTorch's examples and the backends whose flows it
  # does not register here): 11,352 of the 18,252 files are compiled.
  skip='(?<!/backends)/tests?/|/site-packages/(pip|setuptools|huggingface_hub|hydra)/'
  skip+='|/executorch/(examples|backends/(qualcomm|samsung|cadence|cuda|mediatek|example))/'
  "$VENV/bin/python" -m compileall -q -j 0 -x "$skip" \
    "$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" >/dev/null 2>&1 || true
  echo "$want" > "$STAMP"
fi
# The toolkit itself, editable, with the `emlkit` command (no dependencies: they are pinned above).
if [ ! -x "$VENV/bin/emlkit" ] || ! "$VENV/bin/python" -c "import emlkit, sys; sys.exit(0 if emlkit.__file__.startswith('$ROOT/') else 1)" 2>/dev/null; then
  log "installing the emlkit package (editable)"
  "$VENV/bin/pip" install -q --disable-pip-version-check --no-deps --no-build-isolation -e "$ROOT" 2>&1 | { grep -v '^WARNING: Location' || true; }
fi
log "ready: $("$VENV/bin/python" -c 'import torch, executorch; print("torch", torch.__version__)' 2>/dev/null | tail -n1), $(arm-none-eabi-gcc -dumpversion) arm-none-eabi-gcc, $(qemu-system-arm --version | head -n1)"
