#!/usr/bin/env bash
# lm-evaluation-harness for `make check-lm-eval` (test/e2e/lm-eval.test):
# .venv-lmeval with lm_eval (no torch: its local-completions model only
# talks HTTP). Idempotent; the first run downloads about 150 MB from PyPI.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv=$root/.venv-lmeval
want=0.4.13
if [ -x "$venv/bin/lm_eval" ] && "$venv/bin/python" -c "
import importlib.metadata, sys
sys.exit(importlib.metadata.version('lm_eval') != '$want')" 2>/dev/null; then
  exit 0
fi
echo "setup-lmeval: installing lm_eval==$want into $venv"
python3 -m venv "$venv"
"$venv/bin/pip" install -q --upgrade pip
"$venv/bin/pip" install -q "lm_eval[api]==$want"
