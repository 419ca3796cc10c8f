#!/usr/bin/env bash
# Set everything up, then train with the defaults of conf/nav.yaml (CPU-sized when there is no GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python training/train.py "$@"
