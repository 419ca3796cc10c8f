#!/bin/bash
# The node with its lidar off the centre, told and not told (docs/results.md, "The lidar's mount").
cd /work/main && source .venv/bin/activate
B=runs/recipes/holonomic_steer/final/bundle
O=docs/results/lidar_mount
run() { name=$1; shift; echo "[mount] $name $(date -u +%H:%M:%S)"; nav-evaluate --bundle $B --node --episodes 100 --num-envs 100 --seed 1000003 "$@" --json $O/$name.json > $O/$name.log 2>&1; python -c "
import json; d=json.load(open('$O/$name.json')); print('[mount] $name', d['success_rate'], d['collision_rate'], d['timeout_rate'], d.get('gate_states'))"; }
run centre
run turned90_told --lidar-mount -0.04,0,90
run turned90_unaware --lidar-mount -0.04,0,90 --node-unaware
run forward020_told --lidar-mount 0.2,0,0
run forward020_unaware --lidar-mount 0.2,0,0 --node-unaware
echo "[mount] done $(date -u +%H:%M:%S)"
