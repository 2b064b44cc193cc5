#!/usr/bin/env bash
# Create .venv with everything ftqual needs on a CPU machine: pinned packages, torch's CPU build,
# the real nvidia-resiliency-ext 0.7.0 (ft_launcher), and ftqual itself (editable).
# Idempotent: a venv whose stamp matches the lock file is left alone.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
VENV=.venv
STAMP="$VENV/.ftqual-installed"

if [[ "${1:-}" == "--freeze" ]]; then
    { sed -n '1,2p' requirements.lock
      "$VENV/bin/pip" freeze --exclude-editable | grep -v -E '^(nvidia-resiliency-ext|ftqual)[=@ ]' \
        | sed -E 's/^torch==([0-9.]+)\+cpu$/torch==\1/'; } > requirements.lock.new
    mv requirements.lock.new requirements.lock
    exit 0
fi

"$PYTHON" - <<'PY' || { echo "bootstrap: Python 3.11 or newer is required (set PYTHON=...)" >&2; exit 2; }
import sys
sys.exit(0 if sys.version_info >= (3, 11) else 1)
PY

want="$(cat requirements.lock pyproject.toml tools/install_nvrx.py | sha256sum | cut -c1-16)"
if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$want" ]]; then
    exit 0
fi
[[ -x "$VENV/bin/python" ]] || "$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q -r requirements.lock
"$VENV/bin/python" tools/install_nvrx.py --no-deps
"$VENV/bin/python" -m pip install -q --no-deps -e .
echo "$want" > "$STAMP"
echo "bootstrap: $VENV ready ($("$VENV/bin/python" --version), $("$VENV/bin/ft_launcher" --help >/dev/null 2>&1 && echo ft_launcher ok))"
