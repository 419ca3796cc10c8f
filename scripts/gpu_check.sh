#!/usr/bin/env bash
# Set up, then run the GPU check (training/navtrain/gpu_check.py): simulator throughput at 4096,
# 16384 and 65536 worlds, a short training run at 4096 worlds to the default bar, one JSON in
# gpu_check_out/. `--dry-run` shrinks every size and runs on the CPU (CI does that).
# PYTHON=/path/to/python skips the set-up and uses that interpreter (one with a CUDA torch).
set -euo pipefail
cd "$(dirname "$0")/.."
device=cuda
for arg in "$@"; do [ "$arg" = "--dry-run" ] && device=cpu; done
if [ -z "${PYTHON:-}" ]; then
  bash scripts/setup.sh
  PYTHON=.venv/bin/python
fi
exec "$PYTHON" -m navtrain.gpu_check --device "$device" "$@"
