#!/usr/bin/env bash
# The Python environment of the checks against Hugging Face transformers
# (make-goldens.py, parity-random-configs.py): .venv with the versions the
# committed goldens were made with. Idempotent; the first run downloads
# about 1 GB from PyPI.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv=$root/.venv
want="torch==2.15.0 transformers==5.24.0 safetensors==0.8.0"
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "
import torch, transformers, safetensors, sys
sys.exit(not (torch.__version__.startswith('2.15.0') and transformers.__version__ == '5.24.0'))
" 2>/dev/null; then
  exit 0
fi
echo "setup-venv: installing $want into $venv"
python3 -m venv "$venv"
"$venv/bin/pip" install -q --upgrade pip
"$venv/bin/pip" install -q $want
