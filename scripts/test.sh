#!/usr/bin/env bash
# Set everything up, then lint and run the whole test suite (the README's test command).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST
.venv/bin/ruff format --check .
.venv/bin/ruff check .
.venv/bin/python -m pytest -q --durations=15 "$@"
