#!/usr/bin/env bash
# Create bench/py/.venv (if missing) and install the pinned requirements.
# Idempotent: when the venv already matches requirements.txt it returns immediately.
# Prints the venv python path on stdout (everything else goes to stderr).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENV="$HERE/.venv"
PY="$VENV/bin/python"
REQ="$HERE/requirements.txt"
STAMP="$VENV/.requirements.sha256"
BASE_PY="${PYTHON:-python3}"

if [ ! -x "$PY" ]; then
  "$BASE_PY" -m venv "$VENV" >&2
fi
want="$(sha256sum "$REQ" | cut -d' ' -f1)"
have="$(cat "$STAMP" 2>/dev/null || true)"
if [ "$want" != "$have" ]; then
  "$PY" -m pip install --quiet --disable-pip-version-check -r "$REQ" >&2
  "$PY" -c 'import pyjelly.integrations.generic.parse, rdflib' >&2
  echo "$want" > "$STAMP"
fi
echo "$PY"
