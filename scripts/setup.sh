#!/usr/bin/env bash
# Create .venv (Python 3.11) with every pinned dependency of training, deployment, ROS 2 and tests.
# Idempotent: a second run only checks. Pins live in requirements.txt (one place).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null 2>&1 || PY=python3
if [ ! -x .venv/bin/python ]; then
  echo "[setup] creating .venv with $($PY --version)"
  "$PY" -m venv .venv
fi
stamp=.venv/.requirements.sha
want=$(cat requirements.txt contract/pyproject.toml deploy/pyproject.toml training/pyproject.toml bags/pyproject.toml ros2_ws/src/*/setup.py 2>/dev/null | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "[setup] installing pinned dependencies (CPU torch 2.13.0 first, so nothing pulls a CUDA build)"
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q torch==2.13.0
  .venv/bin/python -m pip install -q -r requirements.txt
  # The project's own distributions, editable: contract, robot runtime, training side, bag tools, ROS
  # packages; built with the pinned setuptools of the venv (no isolated build env per package).
  .venv/bin/python -m pip install -q --no-deps --no-build-isolation -e contract -e deploy -e training -e bags \
    -e ros2_ws/src/nav_policy -e ros2_ws/src/nav_policy_sim
  echo "$want" > "$stamp"
fi
echo "[setup] ready: $(.venv/bin/python -c 'import torch, mujoco_warp, rsl_rl, onnxruntime; print("torch", torch.__version__, "| onnxruntime", onnxruntime.__version__)')"
