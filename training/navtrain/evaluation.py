"""Deterministic evaluation on rooms the training never saw: a checkpoint, or a robot-side controller.

A checkpoint's policy acts with its mean action (torch, batched). A robot-side controller (the
exported policy through ``navdeploy.runtime.PolicyRuntime``, or the dynamic-window baseline
``navdeploy.dwa.DwaPlanner``) is called world by world with exactly the node's inputs (the
simulated scan as a LaserScan on the training beams, odometry pose and body twist, goal) and its
SI command is fed back as the normalised action (:class:`RobotSideActor`); its compute time per
call is measured. Auto-reset is off, so each world runs exactly one episode
and its end (reason, time, path) is read directly. Rooms come from a dedicated seed stream
(``runner.eval_seed``, far from the small training seeds).

SPL (success weighted by path length) uses the *straight-line* start-goal distance as the
reference shortest path: SPL_i = S_i * l_i / max(p_i, l_i), with p_i the path the robot drove.
The straight line ignores obstacles, so this SPL is a conservative (lower) estimate.

Rates come with their 95 % Wilson score interval (``success_interval``, ``collision_interval``):
the range of true rates that the counts of this many worlds do not rule out (500 worlds at 94 %
give 91.6-95.8 %), so that two numbers are compared, and a bar is judged, by more than their
point estimates.

Command smoothness: the mean change of the body-frame command from one control tick to the next,
over every tick of every live world (the first tick from rest included), in SI units: the planar
(vx, vy) change in m/s and the yaw-rate change in rad/s.

The evaluation keeps the training sensor model and randomisation (``randomization`` of the
config); ``randomization.enabled=false`` as an override evaluates without it, and
``navtrain.robustness`` runs the matrix of perturbations.
"""

from __future__ import annotations

import copy
import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tensordict import TensorDict

from navcontract.action import ActionScaling, action_to_command
from navcontract.base import DIFF_DRIVE
from navcontract.scan import BeamLayout
from navcontract.subgoal import LookaheadRule
from navdeploy.progress import ProgressRule
from navdeploy.scan_map import ScanMapCfg, ScanPlanner
from navdeploy.settings import plan_clearance
from navsim.config import EnvCfg, NavConfig
from navsim.config_load import apply_override, config_from_data, to_dict
from navsim.contract_objects import policy_spec
from navsim.env import NavEnv
from navsim.families import extent_half
from navsim.families.rooms import RoomBatch
from navsim.lidar import BatchedLidar
from navsim.outcomes import OUTCOMES, Outcome
from navsim.robot import slot_sizes
from navsim.scan_faults import dense_faults
from navtrain.checkpoint import (
    CheckpointError,
    build_actor,
    config_from_checkpoint,
    load_checkpoint,
    spec_differences,
)

ActFn = Callable[[TensorDict, torch.Tensor], torch.Tensor]

SUCCESS = OUTCOMES.index(Outcome.SUCCESS)
COLLISION = OUTCOMES.index(Outcome.COLLISION)
OUT_OF_BOUNDS = OUTCOMES.index(Outcome.OUT_OF_BOUNDS)
TIMEOUT = OUTCOMES.index(Outcome.TIMEOUT)

PROGRESS_EVERY_S = 30.0
"""[s] Wall time between the progress lines of a batch of episodes (robot-side batches take minutes)."""


@dataclass
class EvalResult:
    episodes: int
    success_rate: float
    collision_rate: float
    timeout_rate: float
    out_of_bounds_rate: float
    mean_time_to_goal_s: float
    spl: float
    spl_reference: str
    seed: int
    num_obstacles: list[int]
    controller: str = "policy (checkpoint, torch)"
    compute_ms_per_step: float | None = None  # robot-side controllers: mean time of one call
    command_change_linear: float = math.nan  # [m/s] mean |change of (vx, vy)| per control tick
    command_change_angular: float = math.nan  # [rad/s] mean |change of wz| per control tick
    success_interval: list[float] = field(default_factory=list)  # 95 % Wilson score interval of success_rate
    collision_interval: list[float] = field(default_factory=list)  # and of collision_rate
    gate_states: dict[str, int] | None = None  # behind the node's gate (NodeActor): control ticks per gate state
    by_family: dict[str, dict[str, float]] | None = None  # worlds of several families: each one's rates


def family_rates(outcome: np.ndarray, family: np.ndarray) -> dict[str, dict[str, float]] | None:
    """Per world family present (:data:`navsim.families.FAMILIES` order): its episodes and success,
    collision and timeout rates, with the success's Wilson interval; None when every world is of
    one family (the totals say it all)."""
    from navsim.families import FAMILIES

    present = [int(f) for f in np.unique(family)]
    if len(present) < 2:
        return None
    out = {}
    for f in present:
        oc = outcome[family == f]
        hits = int((oc == SUCCESS).sum())
        out[FAMILIES[f]] = {
            "episodes": int(len(oc)),
            "success_rate": hits / len(oc),
            "collision_rate": float((oc == COLLISION).mean()),
            "timeout_rate": float((oc == TIMEOUT).mean()),
            "success_interval": wilson_interval(hits, len(oc)),
        }
    return out


def format_metric(value: Any, fmt: str, factor: float) -> str:
    """One table cell: ``fmt`` of ``factor * value``, of each bound for an interval (a list), or "—"
    when there is no value (None, NaN, an empty interval)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if isinstance(value, list | tuple):
        return fmt.format(*(factor * v for v in value)) if value else "—"
    return fmt.format(factor * value)


def wilson_interval(hits: int, n: int, z: float = 1.96) -> list[float]:
    """The Wilson score interval [low, high] of a rate seen ``hits`` times in ``n`` trials (``z``:
    1.96 for 95 %). Unlike the normal approximation it stays inside [0, 1] and is not empty at 0
    or ``n`` hits; [0, 1] when there is no trial."""
    if n <= 0:
        return [0.0, 1.0]
    if not 0 <= hits <= n:
        raise ValueError(f"wilson_interval: {hits} hits in {n} trials")
    p = hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    low = 0.0 if hits == 0 else max(0.0, centre - half)  # exactly the bound at 0 or n (no rounding)
    high = 1.0 if hits == n else min(1.0, centre + half)
    return [low, high]


@dataclass
class EpisodeTrace:
    rooms: RoomBatch  # the rooms of the plotted worlds
    paths: list[np.ndarray]  # (T_i, 2) per world
    outcomes: list[Outcome]


def torch_actor(actor: torch.nn.Module) -> ActFn:
    """A checkpoint's actor as an evaluation policy: the mean action, batched."""

    def act(obs: TensorDict, live: torch.Tensor) -> torch.Tensor:
        with torch.inference_mode():
            return actor(obs, stochastic_output=False)

    return act


def command_to_action(cmd: np.ndarray, scaling: ActionScaling) -> np.ndarray:
    """A body-frame ``[vx, vy, wz]`` command within the limits -> the action that
    :func:`navcontract.action.action_to_command` maps back to it: holonomic ``cmd / (v_max, v_max,
    omega_max)``; a diff drive ``(vx / v_max or vx / v_backward, wz / omega_max)`` (its ``vy`` is 0)."""
    if scaling.drive == DIFF_DRIVE:
        linear = scaling.v_max if cmd[0] >= 0 else scaling.backward
        return np.array([cmd[0] / linear if linear > 0 else 0.0, cmd[2] / scaling.omega_max])
    return cmd / np.array([scaling.v_max, scaling.v_max, scaling.omega_max], dtype=np.float64)


class RobotSideActor:
    """Robot-side controllers (one per world) driving the batched simulator, as the node drives them.

    Each live world's controller gets the simulated scan (a LaserScan on the training beams, range
    max = the lidar's max range), the odometry pose, the body-frame twist and the goal, and returns
    the body-frame command in SI units; the command becomes the normalised action the simulator
    scales back (exactly, since the command is inside the limits). A scan the controller cannot use
    gives a zero command, as on the robot.

    Under randomisation it gets what the policy observed, as a robot would have it: the readings
    with dropped beams as NaN (``NavEnv.scan_readings``, resampled by the controller's own rule,
    which fills them as the policy's scan was filled) and the delayed, perturbed odometry
    (``NavEnv.observed_pose`` / ``observed_twist``).
    """

    def __init__(
        self, env: NavEnv, make: Callable[[], Any], scan_map: ScanMapCfg | None = None, map_beams: int = 0
    ) -> None:
        from navcontract.scan import ScanInput, ScanUnusable

        self.env, self.ScanInput, self.ScanUnusable = env, ScanInput, ScanUnusable
        self.controllers = [make() for _ in range(env.num_envs)]
        c = self.controllers[0].contract
        self.num_beams, self.max_range = int(c.num_beams), float(c.max_range)
        self.scaling = c.scaling
        self.calls, self.seconds = 0, 0.0
        self.planners: list[ScanPlanner] | None = None
        if scan_map is not None:  # goal-mode worlds: the node's own map and its path (navdeploy.scan_map)
            if c.robot_radius is None:
                raise ValueError("planning on scans needs the contract's robot.radius (bundle exported before it)")
            rule = c.path_following.rule if c.path_following is not None else LookaheadRule()
            # As the node plans: with the passing clearance of the guard that stops the robot (the env's).
            clearance = plan_clearance(c, env.guard)
            self.planners = [
                ScanPlanner(scan_map, float(c.robot_radius), rule, clearance=clearance) for _ in range(env.num_envs)
            ]
        # The map's scan: the policy's sector minima, or (map_beams > 0) a denser lidar of that many
        # evenly spaced beams over 360 degrees, as a robot's own scanner gives the node.
        self.map_lidar: BatchedLidar | None = None
        self.map_beams = int(map_beams)
        if self.planners is not None:
            self._add_dense_lidar(self.map_beams)
        self.ticks = 0
        self.last_goals = np.full((env.num_envs, 2), np.nan)  # what each controller was last handed as its goal

    def reset(self) -> None:
        for ctrl in self.controllers:
            ctrl.reset()
        for planner in self.planners or []:
            planner.reset()
        self.ticks = 0

    def __call__(self, obs: TensorDict, live: torch.Tensor) -> torch.Tensor:
        env = self.env
        scan = env.scan_readings.cpu().numpy().astype(np.float64)
        pose, twist = env.observed_pose.cpu().numpy(), env.observed_twist.cpu().numpy()
        goal = env.policy_goal.cpu().numpy().copy()  # the goal, or its sub-goal along the path (navcontract.subgoal)
        final = env.rooms.goal.cpu().numpy()
        follow = env.follow.cpu().numpy()
        action = np.zeros((env.num_envs, self.scaling.dim))
        now = self.ticks * env.env_cfg.control_period
        self.ticks += 1
        dense = self._map_scan()
        t0 = time.perf_counter()
        for i in np.flatnonzero(live.cpu().numpy()):
            s = self.ScanInput.training_beams(scan[i], self.num_beams, self.max_range)
            if self.planners is not None and not follow[i]:
                seen = s if dense is None else self.ScanInput.training_beams(dense[i], self.map_beams, self.max_range)
                sub = self.planners[i].step(seen, pose[i], (float(final[i, 0]), float(final[i, 1])), now)
                if sub is not None:
                    goal[i] = sub
            try:
                cmd = self.controllers[i].step(s, pose=pose[i], twist=twist[i], goal=goal[i])
            except self.ScanUnusable:
                cmd = np.zeros(3)
            action[i] = command_to_action(np.asarray(cmd, dtype=np.float64), self.scaling)
            self.calls += 1
        self.seconds += time.perf_counter() - t0
        self.last_goals = goal
        return torch.as_tensor(action, dtype=torch.float32, device=env.device)

    def _add_dense_lidar(self, beams: int) -> None:
        """With ``beams`` > 0, a lidar of that many evenly spaced beams over 360 degrees on every world's
        robot (what a robot's own scanner gives the node), with its own noise stream; 0: none."""
        self.map_beams = int(beams)
        if self.map_beams <= 0:
            return
        env = self.env
        robot_body = env.mj_model.body("base").id
        self.map_lidar = BatchedLidar(
            env.mj_model, env.m, env.d, env.num_envs, self.map_beams, self.max_range, robot_body, env.device
        )
        self.map_noise = torch.Generator(device=env.device)
        self.reseed(int(env.seed))

    def reseed(self, seed: int) -> None:
        """Seed the robot lidar's noise as for an env of ``seed`` (``seed + 7``)."""
        if self.map_beams > 0:
            self.map_noise.manual_seed(int(seed) + 7)

    def _map_scan(self) -> np.ndarray | None:
        """The dense scan of every world (or None): cast from the pose the env's lidar is cast from
        (the observed pose; with a ``lidar_mount``, the lidar's pose on it, its readings in its own
        frame; turned by the world's ``lidar_yaw`` offset), with the world's lidar faults
        beam by beam (:func:`navsim.scan_faults.dense_faults`: bias, noise, spurious no-returns, dropped
        readings as NaN), else the lidar's noise."""
        if self.map_lidar is None:
            return None
        env = self.env
        rand = env.randomization
        pose = env.observed_pose
        mount = getattr(self, "lidar_mount", None)
        if mount is not None:  # the lidar's own pose on each world's robot
            pose = mount.sensor_pose(pose)
        if rand.enabled("lidar_yaw"):
            pose = pose.clone()
            pose[:, 2] += torch.deg2rad(rand.value("lidar_yaw", "deg"))
        ranges = self.map_lidar.scan(pose)
        if mount is not None and mount.upside_down:  # its angle a looks along -a: reading i is beam (n - i) mod n
            n = ranges.shape[1]
            ranges = ranges[:, (n - torch.arange(n, device=ranges.device)) % n]
        ranges = dense_faults(ranges, rand, self.max_range, float(env.env_cfg.lidar.noise_std), self.map_noise)
        return ranges.cpu().numpy().astype(np.float64)

    @property
    def ms_per_call(self) -> float | None:
        return 1e3 * self.seconds / self.calls if self.calls else None


NODE_LIDAR_BEAMS = 720
"""The lidar a robot-side evaluation gives the node and its scan map by default (``map_beams``): this many
evenly spaced beams over 360 degrees, as ``nav-evaluate --map-beams`` does (0: the policy's own sector
readings)."""

PROGRESS_STEP: float = ProgressRule.progress_distance
"""[m] :class:`NodeActor`'s progress: the robot came this much closer to its goal than ever before
(the default of the node's ``progress_distance``, :class:`navdeploy.progress.ProgressRule`)."""

STALLED_S = 10.0
"""[s] A timeout whose robot came no closer to its goal (:data:`PROGRESS_STEP`) for this long before
the end is *stalled*: stuck until the timeout; a shorter idle time, *slow*: still on its way when
time ran out. The split says which to fix."""


class NodeActor(RobotSideActor):
    """What the robot runs: each world's driver (the ONNX policy or the DWA) behind the node's own
    :class:`navdeploy.gate.CommandGate`, built as ``policy_node`` builds it
    (:func:`navdeploy.settings.resolve_settings` of ``params`` over the bundle's contract): scan
    rules, scan map with its sub-goals (inline, not on a worker, so that runs repeat), blocked and
    stuck handling, clamp, velocity smoother, and the guard as the last stage. The env's own guard
    and smoother must be off (:func:`bundle_evaluator` turns them off): the node's are the robot's
    only ones (a second smoother in the simulator would ramp down the node's guard stops).

    Each tick the gate gets what the node would receive: the lidar (``map_beams`` evenly spaced
    beams over 360 degrees with the lidar's noise, or the policy's sector readings when 0), the
    observed odometry, the world's goal in the odometry frame and, in worlds that follow a path,
    that path (as a planner publishes it on ``/plan``). The gate's command becomes the action.
    ``states`` counts the gate's states over all ticks. :meth:`idle_seconds` says, per world, how
    long ago the robot last came :data:`PROGRESS_STEP` closer to its goal than ever before (a timeout
    with a long idle time is a robot stuck until the end, a short one a robot still on its way).
    """

    def __init__(
        self,
        env: NavEnv,
        make: Callable[[], Any],
        params: Any,
        map_beams: int = NODE_LIDAR_BEAMS,
        lidar_mount: Any | None = None,
    ) -> None:
        from navdeploy.settings import resolve_settings

        super().__init__(env, make)
        self.lidar_mount = None if lidar_mount is None or lidar_mount.identity else lidar_mount
        if env.guard is not None:
            raise ValueError("the node's gate is the robot's only guard: evaluate with env.guard.enabled=false")
        if env.stages.accel.active:
            raise ValueError(
                "the node's gate is the robot's only velocity smoother: evaluate with env.smoother.enabled=false"
            )
        period = float(env.env_cfg.control_period)
        first = self.controllers[0]
        settings, _ = resolve_settings(first.contract, replace(params, scan_map_worker=False), first)
        if abs(settings.control_period - period) > 1e-9:
            raise ValueError(f"the node's control period {settings.control_period} s is not the env's {period} s")
        self.settings = settings
        self._add_dense_lidar(map_beams)
        if self.lidar_mount is not None and self.map_beams <= 0:
            raise ValueError("a lidar off the centre needs the node's own lidar (map_beams > 0)")
        # The node's lidar covers the simulated lidar's field of view (env.lidar.fov_deg, centred on
        # forward): a 270-degree scanner publishes only the beams inside it, as its driver would.
        self.fov_beams: np.ndarray | None = None
        fov = math.radians(float(env.env_cfg.lidar.fov_deg))
        if self.map_beams > 0 and fov < 2.0 * math.pi - 1e-9:
            angles = BeamLayout(self.map_beams).angles()
            self.fov_beams = np.flatnonzero(np.abs(angles) <= 0.5 * fov + 1e-9)
            self.fov_angle_min = float(angles[self.fov_beams[0]])
        self.states: dict[str, int] = {}
        self.gates: list[Any] = []
        self.watch: Callable[[int, float, Any], None] | None = None  # (world, now, TickResult) each gate tick

    def reset(self) -> None:
        from navdeploy.gate import CommandGate

        super().reset()
        for gate in self.gates:
            gate.close()
        self.gates = [CommandGate.from_settings(c, self.settings) for c in self.controllers]
        self.started = np.zeros(self.env.num_envs, dtype=bool)
        self.best = np.full(self.env.num_envs, np.inf)  # [m] the least distance to the goal so far
        self.last_tick = np.zeros(self.env.num_envs, dtype=np.int64)  # the last tick each world was driven
        self.improved = np.zeros(self.env.num_envs, dtype=np.int64)  # the tick it last dropped PROGRESS_STEP
        self.first_path_id = np.zeros(self.env.num_envs, dtype=np.int64)  # the map's path id once the goal was set

    def path_changes(self) -> np.ndarray:
        """(n,) how many times the scan map's path in use changed in each world since its goal was set:
        the first path counts, and so does a path lost (1: one path all the way; 0: no scan map, or
        never a path)."""
        out = np.zeros(self.env.num_envs, dtype=np.int64)
        for i, gate in enumerate(self.gates):
            planner = gate.scan_planner
            if planner is not None and self.started[i]:
                out[i] = int(planner.path_id) - int(self.first_path_id[i])
        return out

    def idle_seconds(self) -> np.ndarray:
        """(n,) [s] since each world's robot last came :data:`PROGRESS_STEP` closer to its goal than
        ever before, at the last tick it was driven."""
        return (self.last_tick - self.improved) * float(self.env.env_cfg.control_period)

    def __call__(self, obs: TensorDict, live: torch.Tensor) -> torch.Tensor:
        env = self.env
        pose, twist = env.observed_pose.cpu().numpy(), env.observed_twist.cpu().numpy()
        final = env.rooms.goal.cpu().numpy()
        follow = env.follow.cpu().numpy()
        sectors = env.scan_readings.cpu().numpy().astype(np.float64)
        dense = self._map_scan()
        action = np.zeros((env.num_envs, self.scaling.dim))
        now = self.ticks * float(env.env_cfg.control_period)
        self.ticks += 1
        t0 = time.perf_counter()
        for i in np.flatnonzero(live.cpu().numpy()):
            gate = self.gates[i]
            if not self.started[i]:
                self.started[i] = True
                gate.set_goal(float(final[i, 0]), float(final[i, 1]), "odom")
                if gate.scan_planner is not None:
                    self.first_path_id[i] = int(gate.scan_planner.path_id)
                if follow[i]:
                    count = int(env.rooms.path_count[i])
                    gate.set_path(env.rooms.path[i, :count].cpu().numpy().astype(np.float64), "odom")
            told = self.settings.lidar_mount  # where the node's lidar_* parameters say its lidar sits
            if dense is None:
                gate.set_scan(self.ScanInput.training_beams(sectors[i], self.num_beams, self.max_range), now)
            elif self.fov_beams is not None:
                increment = 2.0 * math.pi / self.map_beams
                part = dense[i][self.fov_beams]
                gate.set_scan(self.ScanInput(part, self.fov_angle_min, increment, 0.0, self.max_range, told), now)
            else:
                layout = self.ScanInput.training_beams(dense[i], self.map_beams, self.max_range)
                gate.set_scan(replace(layout, mount=told), now)
            yaw = float(pose[i, 2])
            quat = (0.0, 0.0, math.sin(yaw / 2), math.cos(yaw / 2))
            gate.set_odom((float(pose[i, 0]), float(pose[i, 1])), quat, tuple(float(v) for v in twist[i]), now, "odom")
            res = gate.tick(now)
            if self.watch is not None:
                self.watch(int(i), now, res)
            self.states[res.state.value] = self.states.get(res.state.value, 0) + 1
            to_goal = math.hypot(float(final[i, 0] - pose[i, 0]), float(final[i, 1] - pose[i, 1]))
            if to_goal <= self.best[i] - PROGRESS_STEP:  # the first tick too: best starts infinite
                self.best[i], self.improved[i] = to_goal, self.ticks - 1
            self.last_tick[i] = self.ticks - 1
            action[i] = command_to_action(np.asarray(res.cmd, dtype=np.float64), self.scaling)
            self.calls += 1
        self.seconds += time.perf_counter() - t0
        return torch.as_tensor(action, dtype=torch.float32, device=env.device)


def run_episodes(
    env: NavEnv, act: ActFn, rooms: RoomBatch, record: int = 0, label: str = "", only: int | None = None
) -> tuple[dict[str, np.ndarray], EpisodeTrace | None]:
    """One episode per world in ``rooms`` (auto-reset must be off); ``act(obs, live)`` gives the
    actions (see :func:`torch_actor`, :class:`RobotSideActor`). ``outcome`` holds each episode's
    code: its index in :data:`navsim.outcomes.OUTCOMES`. With ``only``, world ``only`` alone is
    driven (the others stand still and end as timeouts); it ends as it does in the whole batch, since
    every draw of the batch (noise, randomisation) is made for all its worlds whatever they do. A batch
    that runs longer than :data:`PROGRESS_EVERY_S` prints how far it is that often (``label`` names it)."""
    assert not env.auto_reset, "evaluation needs auto_reset off"
    env.reset(rooms=rooms)
    n = env.num_envs
    finished = torch.zeros(n, dtype=torch.bool, device=env.device)
    if only is not None:
        finished[:] = True
        finished[only] = False
    outcome = torch.full((n,), -1, dtype=torch.long, device=env.device)
    steps = torch.zeros(n, device=env.device)
    path_len = torch.zeros(n, device=env.device)
    start = rooms.start[:, :2].clone()
    prev = start.clone()
    prev_cmd = torch.zeros(n, 3, device=env.device)
    change_lin = torch.zeros(n, device=env.device)
    change_ang = torch.zeros(n, device=env.device)
    trace: list[torch.Tensor] = [start.clone()] if record else []
    obs = env.get_observations()
    if isinstance(act, RobotSideActor):
        act.reset()
    report_at = time.monotonic() + PROGRESS_EVERY_S
    for k in range(env.max_episode_length):
        if time.monotonic() >= report_at:
            report_at += PROGRESS_EVERY_S
            ended = outcome[finished]
            print(
                f"[evaluate] {label}: tick {k}/{env.max_episode_length}, {int(finished.sum())} of {n} worlds ended "
                f"({int((ended == SUCCESS).sum())} success, {int((ended == COLLISION).sum())} collision)",
                flush=True,
            )
        action = act(obs, ~finished)
        action = torch.where(finished[:, None], torch.zeros_like(action), action)
        obs, _, dones, _ = env.step(action)
        info = env.last_info
        pos = info.pose[:, :2]
        live = ~finished
        cmd = action_to_command(action.to(env.device).float(), env.scaling)
        change_lin += torch.where(live, torch.linalg.norm(cmd[:, :2] - prev_cmd[:, :2], dim=-1), 0.0)
        change_ang += torch.where(live, (cmd[:, 2] - prev_cmd[:, 2]).abs(), 0.0)
        prev_cmd = cmd
        path_len += torch.where(live, torch.linalg.norm(pos - prev, dim=-1), torch.zeros_like(path_len))
        steps += live.float()
        prev = pos
        if record:
            trace.append(torch.where(live[:, None], pos, trace[-1]))
        reason = torch.stack([getattr(info, str(o)) for o in OUTCOMES], dim=-1)
        code = torch.argmax(reason.long(), dim=-1)  # the first set flag: the highest priority
        newly = dones.bool() & live
        outcome = torch.where(newly, code, outcome)
        finished |= dones.bool()
        if bool(finished.all()):
            break
    outcome = torch.where(outcome < 0, torch.full_like(outcome, TIMEOUT), outcome)  # unfinished
    result = {
        "outcome": outcome.cpu().numpy(),
        "time_s": (steps * env.env_cfg.control_period).cpu().numpy(),
        "path_len": path_len.cpu().numpy(),
        "straight": torch.linalg.norm(rooms.goal - start, dim=-1).cpu().numpy(),
        "shortest": rooms.shortest_length.cpu().numpy(),  # the planner's (planned worlds) or the straight line
        "num_obstacles": rooms.slot_active.sum(dim=-1).cpu().numpy(),
        "family": rooms.family.cpu().numpy(),  # index into navsim.families.FAMILIES
        "command_change_linear": change_lin.cpu().numpy(),  # per-world sums over its live ticks
        "command_change_angular": change_ang.cpu().numpy(),
    }
    if isinstance(act, NodeActor):  # behind the node's gate: how each robot ended its episode
        result["idle_s"] = act.idle_seconds().astype(np.float64)
        result["path_changes"] = act.path_changes()
    tr = episode_trace(rooms, trace, outcome.cpu().numpy(), steps, record) if record else None
    return result, tr


def episode_trace(
    rooms: RoomBatch, trace: list[torch.Tensor], codes: np.ndarray, steps: torch.Tensor, record: int
) -> EpisodeTrace:
    """The driven paths of ``record`` worlds (``trace``: the positions of every world, tick by tick):
    the failures first (up to half the panels), then the successes, in world order."""
    failed = [int(i) for i in np.flatnonzero(codes != SUCCESS)][: record // 2]
    chosen = sorted(failed + [int(i) for i in np.flatnonzero(codes == SUCCESS)][: record - len(failed)])
    stacked = torch.stack(trace).cpu().numpy()  # (T, n, 2)
    paths = [stacked[: int(steps[i].item()) + 1, i] for i in chosen]
    index = torch.tensor(chosen, device=steps.device)
    return EpisodeTrace(rooms.index(index), paths, [OUTCOMES[int(codes[i])] for i in chosen])


@dataclass
class Evaluator:
    """A controller to evaluate: its config (rooms, sensor model, randomisation), where it runs, and
    how it acts in a given evaluation env."""

    cfg: NavConfig
    label: str
    device: str
    make_act: Callable[[NavEnv], ActFn]
    episodes: dict[str, np.ndarray] | None = field(default=None, repr=False)
    """The last run's per-episode arrays, in world order (:func:`run_episodes`' keys)."""

    def run(
        self,
        cfg: NavConfig | None = None,
        episodes: int = 500,
        seed: int | None = None,
        num_envs: int | None = None,
        plot_rooms: int = 6,
        severity: float | None = None,
    ) -> tuple[EvalResult, EpisodeTrace | None]:
        """``episodes`` unseen rooms with ``cfg`` (default: the evaluator's), its randomisation at
        ``severity`` of its ranges when given (``RandomizationManager.set_severity``). The robot's
        guard and smoother are always the evaluator's (its trained config): ``cfg`` changes the worlds
        and what the base does, never the controller the robot runs."""
        cfg = copy.deepcopy(cfg if cfg is not None else self.cfg)
        env, seed = eval_env(cfg, episodes, seed, num_envs, self.device, controller=self.cfg)
        env.randomization.set_severity(severity)
        act = self.make_act(env)
        result, trace, self.episodes = run_rooms(env, act, cfg, episodes, seed, plot_rooms, self.label)
        if isinstance(act, RobotSideActor):
            result.compute_ms_per_step = act.ms_per_call
        if isinstance(act, NodeActor):
            result.gate_states = dict(sorted(act.states.items()))
        return result, trace


def checkpoint_evaluator(
    checkpoint: str | Path, overrides: Sequence[str] | None = None, device: str = "cpu"
) -> Evaluator:
    """The checkpoint's actor (mean action, torch, batched), checked before any env is built."""
    ckpt, cfg = checkpoint_for_evaluation(checkpoint, overrides)

    def make_act(env: NavEnv) -> ActFn:
        return torch_actor(build_actor(ckpt, cfg, env.device))

    return Evaluator(cfg, "policy (checkpoint, torch)", device, make_act)


def evaluate_checkpoint(
    checkpoint: str | Path,
    episodes: int = 500,
    seed: int | None = None,
    num_envs: int | None = None,
    device: str = "cpu",
    overrides: list[str] | None = None,
    plot_rooms: int = 6,
) -> tuple[EvalResult, EpisodeTrace | None]:
    """The checkpoint's actor (mean action) on ``episodes`` unseen rooms."""
    return checkpoint_evaluator(checkpoint, overrides, device).run(
        episodes=episodes, seed=seed, num_envs=num_envs, plot_rooms=plot_rooms
    )


def checkpoint_for_evaluation(
    checkpoint: str | Path, overrides: Sequence[str] | None = None
) -> tuple[dict[str, Any], NavConfig]:
    """The checkpoint and its config with ``overrides``, checked before any env is built.

    Raises CheckpointError (missing, unreadable or foreign file; an actor that does not fit; an
    override that changes the policy observation, which the policy was not trained on) or
    ConfigError (a malformed override)."""
    ckpt = load_checkpoint(checkpoint)
    trained = config_from_checkpoint(ckpt)
    cfg = with_overrides(trained, overrides)
    if policy_spec(cfg).fingerprint() != policy_spec(trained).fingerprint():
        diffs = spec_differences(policy_spec(trained), policy_spec(cfg))
        raise CheckpointError(
            "the overrides change the policy observation the checkpoint was trained on: " + "; ".join(diffs)
        )
    build_actor(ckpt, cfg)
    return ckpt, cfg


CONTROLLERS = ("policy", "dwa")


def evaluate_controller(
    bundle: str | Path,
    controller: str = "policy",
    episodes: int = 500,
    seed: int | None = None,
    num_envs: int | None = None,
    overrides: list[str] | None = None,
    plot_rooms: int = 6,
    dwa_params: str | Path | None = None,
    scan_map: ScanMapCfg | None = None,
    map_beams: int = NODE_LIDAR_BEAMS,
    node: Any | None = None,
    lidar_mount: Any | None = None,
) -> tuple[EvalResult, EpisodeTrace | None]:
    """A robot-side controller built from ``bundle`` (``policy``: its ONNX policy through the
    runtime; ``dwa``: the dynamic-window baseline from its contract) on ``episodes`` unseen rooms of
    the bundle's training config (plus ``overrides``), on the CPU, world by world; with ``node`` (the
    node's parameters, :data:`navdeploy.node_params.NodeParams`), behind the node's gate
    (:class:`NodeActor`; ``lidar_mount``: where the robot's lidar sits, see there)."""
    return bundle_evaluator(bundle, controller, overrides, dwa_params, scan_map, map_beams, node, lidar_mount).run(
        episodes=episodes, seed=seed, num_envs=num_envs, plot_rooms=plot_rooms
    )


def bundle_evaluator(
    bundle: str | Path,
    controller: str = "policy",
    overrides: Sequence[str] | None = None,
    dwa_params: str | Path | None = None,
    scan_map: ScanMapCfg | None = None,
    map_beams: int = NODE_LIDAR_BEAMS,
    node: Any | None = None,
    lidar_mount: Any | None = None,
) -> Evaluator:
    """A robot-side controller from ``bundle`` (see :func:`evaluate_controller`), on the CPU; with
    ``scan_map``, worlds in goal mode drive along a path planned on the robot's own scans
    (:mod:`navdeploy.scan_map`, as the node does with ``scan_map`` on)."""
    from navdeploy.dwa import DwaParams, DwaPlanner
    from navdeploy.runtime import PolicyRuntime

    if controller not in CONTROLLERS:
        raise ValueError(f"controller must be one of {', '.join(CONTROLLERS)}, got '{controller}'")
    runtime = PolicyRuntime.load(bundle)
    source = runtime.contract.raw.get("source", {}).get("nav_config")
    if source is None:
        raise ValueError(f"bundle {bundle} does not record its training config (contract source.nav_config)")
    cfg = with_overrides(config_from_data(source, where=f"{bundle} contract source.nav_config"), overrides)
    if controller == "policy":
        label = "policy (bundle, onnxruntime)"

        def make() -> Any:
            return PolicyRuntime.load(bundle)
    else:
        label = "dwa (bundle contract)"
        params = DwaParams.from_yaml(dwa_params)

        def make() -> Any:
            return DwaPlanner(runtime.contract, params)

    if node is not None:
        if scan_map is not None:
            raise ValueError("behind the node's gate the scan map is the node's (its scan_map parameter)")
        cfg.env.guard.enabled = False  # the node's guard and smoother are the robot's only ones
        cfg.env.smoother.enabled = False
        if lidar_mount is not None:
            label += mount_label(lidar_mount, node)
        return Evaluator(
            cfg,
            label + " behind the node's gate",
            "cpu",
            lambda env: NodeActor(env, make, node, map_beams, lidar_mount),
        )
    if scan_map is not None:
        label += " + scan map"
    return Evaluator(cfg, label, "cpu", lambda env: RobotSideActor(env, make, scan_map, map_beams))


def mount_label(mount: Any, node: Any) -> str:
    """`` (lidar at x, y m, yaw d deg[, upside down]; the node told|not told)``: where the simulated
    robot's lidar sits, and whether the node's lidar_* parameters say so."""
    from navcontract.scan import LidarMount

    told = LidarMount(node.lidar_x, node.lidar_y, node.lidar_yaw, node.lidar_upside_down) == mount
    return (
        f" (lidar at {mount.x:g}, {mount.y:g} m, yaw {math.degrees(mount.yaw):.0f} deg"
        f"{', upside down' if mount.upside_down else ''}; the node {'told' if told else 'not told'})"
    )


def with_scan_map(evaluator: Evaluator, **changes: Any) -> Evaluator:
    """``evaluator`` (behind the node's gate) with the node's scan map settings changed by
    ``changes`` (fields of :class:`navdeploy.scan_map.ScanMapCfg`, e.g. ``return_filter=10``): the
    gates it builds from then on use them. For experiments the node's parameters do not expose."""
    make_act = evaluator.make_act

    def make(env: NavEnv) -> ActFn:
        act = make_act(env)
        if not isinstance(act, NodeActor) or act.settings.scan_map is None:
            raise ValueError("with_scan_map: the evaluator does not drive behind the node's gate with its scan map")
        scan_map = replace(act.settings.scan_map, **changes)
        act.settings = replace(act.settings, scan_map=scan_map)  # the gates are built at each reset
        return act

    return replace(evaluator, make_act=make)


def with_overrides(cfg: NavConfig, overrides: Sequence[str] | None) -> NavConfig:
    if not overrides:
        return cfg
    data = to_dict(cfg)
    for ov in overrides:
        apply_override(data, ov)
    return config_from_data(data, where="evaluation overrides")


def eval_env(
    cfg: NavConfig,
    episodes: int,
    seed: int | None,
    num_envs: int | None,
    device: str,
    controller: NavConfig | None = None,
) -> tuple[NavEnv, int]:
    """The evaluation env: auto-reset off, the training sensor model, rooms from the eval seed; the
    guard and smoother of ``controller`` (default: ``cfg``'s; see :class:`navsim.env.NavEnv`)."""
    seed = cfg.runner.eval_seed if seed is None else seed
    cfg.env.auto_reset = False  # the sensor model (lidar noise) stays the training one
    env = NavEnv(
        cfg, num_envs=min(episodes, num_envs or 500), device=device, seed=seed, world_pool=False, controller=controller
    )
    env.log_episodes = False
    return env, seed


def run_rooms(
    env: NavEnv, act: ActFn, cfg: NavConfig, episodes: int, seed: int, plot_rooms: int, label: str
) -> tuple[EvalResult, EpisodeTrace | None, dict[str, np.ndarray]]:
    """``episodes`` rooms of the seed's stream, one batch of ``env.num_envs`` at a time: the summary,
    the trace of the first batch, and the per-episode arrays (:func:`run_episodes`' keys)."""
    gen = torch.Generator(device=env.device)
    gen.manual_seed(seed)
    parts: list[dict[str, np.ndarray]] = []
    trace = None
    done = 0
    while done < episodes:
        rooms = env.new_rooms(env.num_envs, gen)
        res, tr = run_episodes(env, act, rooms, record=plot_rooms if trace is None else 0, label=label)
        trace = trace or tr
        take = min(env.num_envs, episodes - done)
        parts.append({k: v[:take] for k, v in res.items()})
        done += take
        print(f"[evaluate] {label}: {done}/{episodes} episodes", flush=True)
    allr = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    result = summarize(allr, cfg, seed, label, planned=env.planned, control_period=env.env_cfg.control_period)
    return result, trace, allr


def summarize(
    allr: dict[str, np.ndarray], cfg: NavConfig, seed: int, label: str, planned: bool, control_period: float
) -> EvalResult:
    """The summary of episodes (:func:`run_episodes`' keys, every batch concatenated) of rooms made with
    ``cfg`` from ``seed``: rates with their intervals, time to goal, SPL (against the planner's shortest
    path when the worlds are ``planned``, else the straight line), command changes per live tick."""
    oc = allr["outcome"]
    succ = oc == SUCCESS
    ref = allr["shortest"]
    spl = succ * ref / np.maximum(allr["path_len"], ref)
    ticks = max(1.0, float(allr["time_s"].sum()) / control_period)  # live ticks of all worlds
    return EvalResult(
        episodes=int(len(oc)),
        success_rate=float(succ.mean()),
        collision_rate=float((oc == COLLISION).mean()),
        timeout_rate=float((oc == TIMEOUT).mean()),
        out_of_bounds_rate=float((oc == OUT_OF_BOUNDS).mean()),
        mean_time_to_goal_s=float(allr["time_s"][succ].mean()) if succ.any() else math.nan,
        spl=float(spl.mean()),
        spl_reference=(
            "shortest feasible path at the certified clearance (navsim.grid_planner, env.worlds.certify)"
            if planned
            else "straight-line start-goal distance (ignores obstacles: conservative)"
        ),
        seed=int(seed),
        num_obstacles=[int(cfg.env.room.num_obstacles[0]), int(cfg.env.room.num_obstacles[1])],
        controller=label,
        command_change_linear=float(allr["command_change_linear"].sum() / ticks),
        command_change_angular=float(allr["command_change_angular"].sum() / ticks),
        success_interval=wilson_interval(int(succ.sum()), len(oc)),
        collision_interval=wilson_interval(int((oc == COLLISION).sum()), len(oc)),
        by_family=family_rates(oc, allr["family"]),
    )


def write_json(result: EvalResult, path: str | Path) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(asdict(result), indent=2) + "\n")


def plot_trace(trace: EpisodeTrace, env_cfg: EnvCfg, path: str | Path, title: str = "") -> None:
    """Rooms with obstacles, start, goal and the driven path coloured by outcome; the failures
    first, then the successes, each in world order."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Circle, Polygon, Rectangle

    extent = extent_half(env_cfg)
    sizes = slot_sizes(env_cfg)
    robot_radius = env_cfg.robot.radius
    colours = {
        Outcome.SUCCESS: "tab:green",
        Outcome.COLLISION: "tab:red",
        Outcome.TIMEOUT: "tab:orange",
        Outcome.OUT_OF_BOUNDS: "tab:purple",
    }
    n = len(trace.paths)
    cols = min(3, n)
    rows = math.ceil(n / cols)
    halves = trace.rooms.half.cpu().numpy()
    hx_max = float(np.nanmax(np.where(np.isfinite(halves[:, 0]), halves[:, 0], extent)))
    hy_max = float(np.nanmax(np.where(np.isfinite(halves[:, 1]), halves[:, 1], extent)))
    aspect = hy_max / hx_max
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, max(1.6, 4 * aspect) * rows + 0.4), squeeze=False)
    radii = np.concatenate([sizes.cylinder_radius, np.zeros(len(sizes.box_half))])
    halfs = np.concatenate([np.zeros((len(sizes.cylinder_radius), 2)), sizes.box_half])
    r = trace.rooms
    order = sorted(range(n), key=lambda k: trace.outcomes[k] == Outcome.SUCCESS)  # stable: failures first
    for panel in range(rows * cols):
        ax = axes[panel // cols][panel % cols]
        ax.set_aspect("equal")
        ax.set_xticks([])
        ax.set_yticks([])
        if panel >= n:
            ax.axis("off")
            continue
        i = order[panel]
        hx, hy = (float(v) if math.isfinite(float(v)) else extent for v in halves[i])
        ax.add_patch(Rectangle((-hx, -hy), 2 * hx, 2 * hy, fill=False, lw=2, color="0.3"))
        if int(r.path_count[i]) > 2:  # the planner's path, for reference
            ref = r.path[i, : int(r.path_count[i])].cpu().numpy()
            ax.plot(ref[:, 0], ref[:, 1], ":", color="0.35", lw=1)
        pos = r.slot_pos[i].cpu().numpy()
        yaw = r.slot_yaw[i].cpu().numpy()
        act = r.slot_active[i].cpu().numpy()
        for j in np.flatnonzero(act):
            if radii[j] > 0:
                ax.add_patch(Circle(pos[j], radii[j], color="0.55"))
            else:
                bx, by = halfs[j]
                c, s = math.cos(yaw[j]), math.sin(yaw[j])
                corners = np.array([[bx, by], [-bx, by], [-bx, -by], [bx, -by]]) @ np.array([[c, s], [-s, c]]) + pos[j]
                ax.add_patch(Polygon(corners, color="0.55"))
        p = trace.paths[i]
        colour = colours[trace.outcomes[i]]
        ax.plot(p[:, 0], p[:, 1], color=colour, lw=2)
        ax.add_patch(Circle(p[-1], robot_radius, fill=False, ec=colour, lw=1.5))  # footprint at the end
        ax.plot(*r.start[i, :2].cpu().numpy(), "o", color="tab:blue", ms=8, label="start")
        ax.plot(*r.goal[i].cpu().numpy(), "*", color="gold", mec="k", ms=14, label="goal")
        ax.set_xlim(-hx - 0.2, hx + 0.2)
        ax.set_ylim(-hy - 0.2, hy + 0.2)
        ax.set_title(trace.outcomes[i], color=colour)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
