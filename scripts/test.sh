#!/usr/bin/env bash
# Set everything up, then lint and run the whole test suite (the README's test command).
#   bash scripts/test.sh                  the whole suite
#   bash scripts/test.sh --fast           the fast tier for the inner loop: pytest -m "not slow"
#   bash scripts/test.sh --fast -m "not ros"   both: -m "not slow and (not ros)"
# Every other argument goes to pytest (e.g. tests/runtime, -k name, -x). Tests run on one worker
# per core (pytest-xdist, -n auto); NAV_TEST_WORKERS=1 runs them in this process, one by one.
set -euo pipefail
cd "$(dirname "$0")/.."
fast=0
marker=""
args=()
while [ $# -gt 0 ]; do
  case $1 in
    --fast) fast=1 ;;
    -m) marker=${2:?"-m needs a marker expression"}; shift ;;
    *) args+=("$1") ;;
  esac
  shift
done
if [ "$fast" = 1 ]; then
  marker="not slow${marker:+ and ($marker)}"
fi
if [ -n "$marker" ]; then
  args+=(-m "$marker")
fi
bash scripts/setup.sh
export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST
.venv/bin/ruff format --check .
.venv/bin/ruff check .
workers=${NAV_TEST_WORKERS:-auto}
parallel=()
if [ "$workers" != 1 ]; then
  parallel=(-n "$workers" --dist worksteal)
fi
.venv/bin/python -m pytest -q --durations=15 "${parallel[@]}" ${args[@]+"${args[@]}"}
