"""NavEnv: N worlds of the navigation task stepped as one MuJoCo Warp batch (rsl_rl VecEnv).

Everything in ``step()`` is batched tensor work on the Warp device; torch and Warp share the
buffers (``wp.to_torch`` / ``wp.from_torch``) without copies. There are no per-world Python loops
and no host round-trips in the physics, lidar, rewards or resets: finished worlds are reset with
masks, taking fresh worlds from the env's world source (:mod:`navsim.world_source`: a ring of spare
rooms refilled a slice per step, or pools of planned worlds).

Episode statistics reach rsl_rl the way its ``VecEnv`` documents: ``extras["log"]`` holds, for the
episodes that ended on this step, their per-term reward sums (``Episode_Reward/<term>``), their
outcome (``Episode_Termination/<outcome>``, 0/1 per episode) and length (``Episode/length_s``);
rsl_rl's logger averages them over the iteration, i.e. over the iteration's episodes. Selecting
the ended episodes costs one host sync per step (rsl_rl's logger makes one per step anyway);
``log_episodes = False`` (evaluation) skips it.

Randomisation (``randomization`` in the config; ``navsim.randomization``) changes how the base
answers (``navsim.actuation``: delay, lag, acceleration limit, before every physics substep),
what the policy observes (scan and odometry of a few substeps earlier, perturbed twist, lidar
faults of ``navsim.scan_faults``, lidar yaw offset) and never the truth: rewards, outcomes and
the privileged terms use the true current state. Values are drawn per world at each episode
reset from the randomisation's own generator; ``extras["log"]`` then also holds
``Randomization/<term>/<param>``, the values drawn for the worlds reset on the step (one per world,
like the episode entries: the logger shows their mean). With randomisation
off (or every term off) ``step()`` runs the very kernels and draws of the simulator without it.
What the policy observed is kept for robot-side controllers: :attr:`NavEnv.scan_readings` (the
scan as a driver publishes it, NaN for dropped readings), :attr:`NavEnv.observed_pose`,
:attr:`NavEnv.observed_twist`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import mujoco
import mujoco_warp as mjw
import torch
import warp as wp
from rsl_rl.env import VecEnv
from tensordict import TensorDict

from navcontract.action import clip_action
from navcontract.subgoal import LookaheadRule, follow_path, open_subgoal
from navcontract.terms import ObsContext, goal_in_body
from navsim.actuation import BaseDynamics, CommandStages
from navsim.config import NavConfig
from navsim.config_load import to_dict
from navsim.contract_objects import action_scaling, guard_rule, sensor_dims, smoother_limits
from navsim.families import FAMILIES, extent_half, planned
from navsim.families.rooms import RoomBatch, RoomGeometry
from navsim.lidar import BatchedLidar
from navsim.observations import ObservationManager, SimTruth
from navsim.outcomes import OUTCOMES
from navsim.randomization import RandomizationManager
from navsim.rewards import RewardManager, RewardState
from navsim.robot import OBSTACLE_HALF_HEIGHT, PARK_Z, build_mjcf, geom_ids, slot_sizes
from navsim.scan_faults import LidarFaults, MissingFill
from navsim.sectors import FovFill, SectorRays
from navsim.world_pool import Curriculum
from navsim.world_source import PlannedWorldSource, RoomSource, WorldSource

BASE_TERMS = ("actuator_lag", "accel_limit", "command_latency", "control_jitter", "observation_latency")
"""Randomisation terms applied by :class:`navsim.actuation.BaseDynamics` (with its state record)."""


@wp.kernel
def _body_command_to_ctrl(cmd: wp.array2d[wp.float32], qpos: wp.array2d[wp.float32], ctrl: wp.array2d[wp.float32]):
    """Rotate the body-frame (vx, vy) command into the world-frame jx / jy actuators at the current
    yaw; wz drives jz directly. Run before every physics substep, so a held body-frame command
    drives an arc, as a real base holding a Twist does. The device twin of
    ``navsim.robot.body_to_world`` (the C MuJoCo side)."""
    w = wp.tid()
    c = wp.cos(qpos[w, 2])
    s = wp.sin(qpos[w, 2])
    ctrl[w, 0] = c * cmd[w, 0] - s * cmd[w, 1]
    ctrl[w, 1] = s * cmd[w, 0] + c * cmd[w, 1]
    ctrl[w, 2] = cmd[w, 2]


def resolve_device(name: str) -> str:
    """'auto' -> 'cuda:0' when Warp sees a CUDA device, else 'cpu'."""
    if name == "auto":
        return "cuda:0" if wp.get_cuda_device_count() > 0 else "cpu"
    return name


@dataclass
class StepInfo:
    """Per-world outcome flags of the last step (before the auto-reset), named as
    :class:`navsim.outcomes.Outcome`; at most one is set per world."""

    pose: torch.Tensor
    success: torch.Tensor
    collision: torch.Tensor
    timeout: torch.Tensor
    out_of_bounds: torch.Tensor


class NavEnv(VecEnv):
    """The batched navigation environment: an rsl_rl ``VecEnv``. Its action is the base's
    (``num_actions``: 3, ``(vx, vy, wz)``, for a holonomic base; 2, ``(v, wz)``, for a diff drive),
    mapped to the body-frame ``[vx, vy, wz]`` command by :func:`navcontract.action.action_to_command`."""

    def __init__(
        self,
        cfg: NavConfig,
        num_envs: int | None = None,
        device: str | None = None,
        seed: int | None = None,
        world_pool: bool = True,
        controller: NavConfig | None = None,
    ) -> None:
        """``world_pool=False`` (evaluation, which hands its own worlds to :meth:`reset`): planned
        families start from unplanned placeholder worlds and draw no pool; auto-reset needs one.
        ``controller``: the config whose command stages the env applies (the guard and the velocity
        smoother, which run on the robot; default ``cfg``). Evaluation passes the policy's trained
        config, so a condition that changes only what the base does (a robustness row, randomisation
        off) leaves the robot's guard and smoother as they were trained, as the node keeps them."""
        wp.config.quiet = True
        wp.init()
        self.nav_cfg = cfg
        ecfg = cfg.env
        self.env_cfg = ecfg
        self.num_envs = int(num_envs if num_envs is not None else ecfg.num_envs)
        dev = resolve_device(device or ecfg.device)
        self.wp_device = wp.get_device(dev)
        self.device = torch.device("cuda", self.wp_device.ordinal) if self.wp_device.is_cuda else torch.device("cpu")
        self.cfg = to_dict(cfg)  # rsl_rl's VecEnv.cfg: the config as plain data
        self.seed = int(ecfg.seed if seed is None else seed)
        self.max_episode_length = int(round(ecfg.episode_length_s / ecfg.control_period))
        self.auto_reset = ecfg.auto_reset
        self.half = extent_half(ecfg)
        self.radius = float(ecfg.robot.radius)
        self.dims = sensor_dims(cfg)
        self.scaling = action_scaling(cfg)
        self.num_actions = self.scaling.dim
        robot = cfg if controller is None else controller
        self.guard = guard_rule(robot)
        self.stages = CommandStages(
            self.scaling, self.guard, self.dims.max_range, smoother_limits(robot), ecfg.control_period
        )
        self.lookahead = LookaheadRule(lookahead=ecfg.worlds.lookahead, search_window=ecfg.worlds.search_window)
        self.log_episodes = True  # extras["log"] with the statistics of the episodes ending each step
        self._build_model()
        self._build_lidar()
        self._build_randomization()
        # Worlds, managers, buffers.
        self.geometry = RoomGeometry(ecfg, self.sizes, self.device)
        self.gen = torch.Generator(device=self.device)
        self.gen.manual_seed(self.seed)
        self.noise_gen = torch.Generator(device=self.device)
        self.noise_gen.manual_seed(self.seed + 7919)
        self.obs_manager = ObservationManager(cfg.observations, self.dims, self.num_envs, self.device)
        self.reward_manager = RewardManager(cfg.rewards, self.num_envs, self.device)
        stuck = self.reward_manager.params("stuck")
        self.stuck_window = int(stuck["window"])
        self.stuck_min_move = float(stuck["min_move"])
        self.gamma = cfg.algorithm.gamma
        self._build_buffers()
        n = self.num_envs
        if planned(ecfg.worlds):
            self.world_source: WorldSource = PlannedWorldSource(ecfg, self.geometry, n, self.gen, world_pool)
        else:
            self.world_source = RoomSource(ecfg, self.geometry, n, self.gen)
        self.rooms: RoomBatch = self.world_source.first
        self.reset()

    def _build_model(self) -> None:
        """The MJCF of the config, compiled, and put on the Warp device with N worlds; the torch
        views of the state the env reads and writes."""
        ecfg = self.env_cfg
        self.mjcf = build_mjcf(ecfg)
        self.mj_model = mujoco.MjModel.from_xml_string(self.mjcf)
        mj_data = mujoco.MjData(self.mj_model)
        mujoco.mj_forward(self.mj_model, mj_data)
        ids = geom_ids(self.mj_model)
        self.slot_ids = torch.as_tensor(ids["slots"], device=self.device)
        self.shell_id = int(ids["shell"][0])
        self.sizes = slot_sizes(ecfg)
        with wp.ScopedDevice(self.wp_device):
            self.m = mjw.put_model(self.mj_model)
            self.d = mjw.put_data(self.mj_model, mj_data, nworld=self.num_envs, naconmax=self.num_envs * 8, njmax=8)
        if hasattr(self.m.opt, "warn_overflow"):
            self.m.opt.warn_overflow = 0
        self.qpos = wp.to_torch(self.d.qpos)
        self.qvel = wp.to_torch(self.d.qvel)
        self.ctrl = wp.to_torch(self.d.ctrl)
        self.qacc_warmstart = wp.to_torch(self.d.qacc_warmstart)
        self.geom_xpos = wp.to_torch(self.d.geom_xpos)
        self.geom_xmat = wp.to_torch(self.d.geom_xmat).view(self.num_envs, -1, 3, 3)
        self.nacon = wp.to_torch(self.d.nacon)
        self.contact_world = wp.to_torch(self.d.contact.worldid)
        self.contact_geom = wp.to_torch(self.d.contact.geom)
        self.contact_dist = wp.to_torch(self.d.contact.dist)
        self._contact_index = torch.arange(self.contact_world.shape[0], device=self.device)
        self._graph = None
        self.command = torch.zeros(self.num_envs, 3, device=self.device)  # body-frame [vx, vy, wz]
        self.guard_scale = torch.ones(self.num_envs, device=self.device)  # the guard's last factor
        self.guard_cut = torch.zeros(self.num_envs, device=self.device)  # planar speed it took off / v_max
        self._command_wp = wp.from_torch(self.command)

    def _build_lidar(self) -> None:
        """The batched lidar of ``env.lidar``: sector minima, the runtime's fill outside the view."""
        lcfg = self.env_cfg.lidar
        self.sector_rays = SectorRays(self.dims.num_beams, lcfg.rays_per_beam, lcfg.fov_deg)
        self.fov_seen = torch.as_tensor(self.sector_rays.seen.copy(), device=self.device)
        self.lidar = BatchedLidar(
            self.mj_model,
            self.m,
            self.d,
            self.num_envs,
            self.dims.num_beams,
            self.dims.max_range,
            self.mj_model.body("base").id,
            self.device,
            rays=self.sector_rays,
            fill=FovFill(self.sector_rays.seen, self.dims.max_range, lcfg.fov_fill, lcfg.fov_fill_value),
        )

    def _build_randomization(self) -> None:
        """The randomisation manager, the base's dynamics when a base term is on, the lidar faults."""
        ecfg, lcfg = self.env_cfg, self.env_cfg.lidar
        self.randomization = RandomizationManager(self.nav_cfg.randomization, self.num_envs, self.device, self.seed)
        rand = self.randomization
        self.base: BaseDynamics | None = None
        if any(rand.enabled(t) for t in BASE_TERMS):
            dt = ecfg.control_period / ecfg.physics_substeps
            self.base = BaseDynamics(self.command, ecfg.physics_substeps, dt, self.d, self.wp_device)
        missing = None
        if rand.enabled("lidar_dropout"):
            missing = MissingFill(
                self.dims.num_beams, self.dims.max_range, lcfg.fov_fill, lcfg.fov_fill_value, self.device
            )
        self.lidar_faults = LidarFaults(
            rand, self.fov_seen, self.dims.max_range, lcfg.noise_std, self.lidar.fill, missing, lcfg.noise_beams
        )

    def _build_buffers(self) -> None:
        """Per-world state of the episode, the path following and the observations."""
        n = self.num_envs
        self.episode_length_buf = torch.zeros(n, dtype=torch.long, device=self.device)
        self.prev_action = torch.zeros(n, self.num_actions, device=self.device)
        self.prev_goal_dist = torch.zeros(n, device=self.device)
        self.pos_window = torch.zeros(n, self.stuck_window, 2, device=self.device)
        self.follow = torch.zeros(n, dtype=torch.bool, device=self.device)
        self.path_progress = torch.zeros(n, device=self.device)  # the policy's, from what it observes
        self.reward_progress = torch.zeros(n, device=self.device)  # the reward's, from the true pose
        self.policy_goal = torch.zeros(n, 2, device=self.device)
        self.obs_buf: dict[str, torch.Tensor] = self.obs_manager.zeros()
        self.last_info: StepInfo | None = None
        self.scan = torch.full((n, self.dims.num_beams), self.dims.max_range, device=self.device)
        self.scan_clean = self.scan.clone()
        self.scan_readings = self.scan
        self.scan_seen: torch.Tensor | None = None  # the beams the policy's scan saw; None: every one
        self.observed_pose = torch.zeros(n, 3, device=self.device)
        self.observed_twist = torch.zeros(n, 3, device=self.device)

    # ------------------------------------------------------------------------------------------
    # rsl_rl VecEnv interface

    def get_observations(self) -> TensorDict:
        return TensorDict(dict(self.obs_buf), batch_size=[self.num_envs], device=self.device)

    def step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict[str, Any]]:
        action = clip_action(actions.to(self.device).float())
        self._drive(actions)
        self.episode_length_buf += 1

        pose = self.pose()
        collision = self._collided()
        goal_dist = torch.linalg.norm(self.rooms.goal - pose[:, :2], dim=-1)
        out_of_bounds = (pose[:, :2].abs() > self.half).any(dim=-1)
        success = (goal_dist < self.env_cfg.goal_tolerance) & ~collision & ~out_of_bounds
        terminated = success | collision | out_of_bounds
        time_outs = (self.episode_length_buf >= self.max_episode_length) & ~terminated
        dones = terminated | time_outs
        flags = {"success": success, "collision": collision, "timeout": time_outs, "out_of_bounds": out_of_bounds}
        rewards = self._rewards(pose, action, goal_dist, flags)
        # Outcomes by priority (navsim.outcomes): a collision outside the room counts as a collision.
        left_room = out_of_bounds & ~collision
        self.last_info = StepInfo(pose, success, collision, time_outs, left_room)

        flags["out_of_bounds"] = left_room
        extras, ended = self._extras(dones, {str(o): flags[o] for o in OUTCOMES})
        if self.auto_reset:
            self._reset_where(dones, fresh=True)
            collision = collision & ~dones
            if "log" in extras and self.randomization.active:
                extras["log"].update(self.randomization.log(ended))
        self._observe(contact=collision)
        return self.get_observations(), rewards, dones.long(), extras

    def _drive(self, actions: torch.Tensor) -> None:
        """The raw actions through the command stages (:class:`navsim.actuation.CommandStages`: the
        clamp, the smoother from the last command sent, the guard last on the scan the policy just
        saw, as the node does) to the base, for one control period of physics."""
        if self.base is not None:
            self._prepare_base()
        requested = self.stages.requested(actions.to(self.device).float(), self.command, self.scan, self.scan_seen)
        command, scale = self.stages.guarded(requested, self.scan, self.scan_seen, self.observed_twist)
        if scale is not None:
            self.guard_scale = scale
        self.guard_cut = torch.linalg.norm(requested[:, :2] - command[:, :2], dim=-1) / self.dims.v_max
        self.command.copy_(command)
        self._simulate()

    def _rewards(
        self, pose: torch.Tensor, action: torch.Tensor, goal_dist: torch.Tensor, flags: dict[str, torch.Tensor]
    ) -> torch.Tensor:
        """The step's rewards; the progress and stuck bookkeeping move on to this step."""
        progress_dist, reward_goal = goal_dist, self.rooms.goal
        if self.follow_active:
            # Following a path, progress is measured along it, and the goal to face is the sub-goal the
            # policy was given for this step (the node's rule: along the path, turned where the guard
            # cuts the straight line short), not one it never saw.
            _, self.reward_progress, remaining = follow_path(
                self.rooms.path, self.rooms.path_count, pose[:, :2], self.reward_progress, self.lookahead
            )
            progress_dist = torch.where(self.follow, remaining, goal_dist)
            reward_goal = self.policy_goal
        twist = self.body_twist()
        gx, gy = goal_in_body(self._context(pose, twist, action, reward_goal))
        goal_cos = gx / torch.sqrt(gx * gx + gy * gy).clamp(min=1e-9)
        clearance, _ = self.geometry.nearest(self.rooms, pose[:, None, :2])
        slot = self.episode_length_buf % self.stuck_window
        oldest = self.pos_window.gather(1, slot[:, None, None].expand(-1, 1, 2))[:, 0]
        displacement = torch.linalg.norm(pose[:, :2] - oldest, dim=-1)
        self.pos_window.scatter_(1, slot[:, None, None].expand(-1, 1, 2), pose[:, None, :2])
        state = RewardState(
            goal_dist=progress_dist,
            prev_goal_dist=self.prev_goal_dist,
            goal_cos=goal_cos,
            v_forward=twist[:, 0],
            action=action,
            prev_action=self.prev_action,
            surface_clearance=clearance[:, 0] - self.radius,
            guard_cut=self.guard_cut,
            displacement=displacement,
            window_full=self.episode_length_buf >= self.stuck_window,
            success=flags["success"],
            collision=flags["collision"],
            timeout=flags["timeout"],
            out_of_bounds=flags["out_of_bounds"],
            v_max=self.dims.v_max,
            gamma=self.gamma,
        )
        rewards = self.reward_manager.compute(state)
        self.prev_goal_dist = progress_dist
        self.prev_action = action
        return rewards

    def _extras(
        self, dones: torch.Tensor, reasons: dict[str, torch.Tensor]
    ) -> tuple[dict[str, Any], torch.Tensor | None]:
        """rsl_rl's extras of the step and the worlds whose episode ended (None without episode
        logging); the world source's bookkeeping of the step happens here too."""
        length_s = self.episode_length_buf.float() * self.env_cfg.control_period * dones.float()
        sums = self.reward_manager.close_episodes(dones)
        extras: dict[str, Any] = {"time_outs": reasons["timeout"], "termination": reasons, "episode_length_s": length_s}
        ended = dones.nonzero()[:, 0] if self.log_episodes else None  # the one host sync of the step
        if ended is not None and ended.numel() > 0:
            extras["log"] = self._episode_log(ended, reasons, sums, length_s)
            if self.planned:
                extras["log"].update(self._family_log(ended, reasons["success"], reasons["collision"]))
            if self.guard is not None:  # share of the worlds whose command the guard slowed this step
                extras["log"]["Guard/limited"] = (self.guard_scale < 1.0).float().mean()
        self.world_source.end_step(dones, reasons["success"], self.auto_reset, extras.get("log"))
        return extras, ended

    # ------------------------------------------------------------------------------------------
    # Public helpers

    @property
    def planned(self) -> bool:
        """True when the worlds are planned worlds of the families (:class:`PlannedWorldSource`)."""
        return self.world_source.planned

    @property
    def curriculum(self) -> Curriculum | None:
        return self.world_source.curriculum

    def reset(self, rooms: RoomBatch | None = None) -> TensorDict:
        """Reset every world (with ``rooms`` when given, else the current ones)."""
        if rooms is not None:
            self.rooms = rooms
        all_worlds = torch.ones(self.num_envs, dtype=torch.bool, device=self.device)
        self._reset_where(all_worlds, fresh=False)
        self._observe(contact=torch.zeros(self.num_envs, dtype=torch.bool, device=self.device))
        return self.get_observations()

    def randomize_episode_lengths(self) -> None:
        """Spread episode lengths so worlds do not all time out on the same step."""
        self.episode_length_buf = torch.randint(
            0, self.max_episode_length, (self.num_envs,), generator=self.gen, device=self.device
        )

    def reseed(self, seed: int) -> None:
        """Seed the env's generators from ``seed`` with the offsets a new env uses: worlds ``seed``, sensor
        noise ``seed + 7919``, randomisation ``seed + 104729`` (what comes next no longer depends on
        what ran before: an evaluation batch replays by itself)."""
        self.seed = int(seed)
        self.gen.manual_seed(self.seed)
        self.noise_gen.manual_seed(self.seed + 7919)
        self.randomization.gen.manual_seed(self.seed + 104_729)

    def pose(self) -> torch.Tensor:
        return self.qpos[:, 0:3].clone()

    def body_twist(self) -> torch.Tensor:
        yaw = self.qpos[:, 2]
        c, s = torch.cos(yaw), torch.sin(yaw)
        vx, vy = self.qvel[:, 0], self.qvel[:, 1]
        return torch.stack([c * vx + s * vy, -s * vx + c * vy, self.qvel[:, 2]], dim=-1)

    @property
    def follow_active(self) -> bool:
        return self.planned and self.env_cfg.worlds.path_following > 0

    def new_rooms(self, n: int, gen: torch.Generator) -> RoomBatch:
        """``n`` fresh worlds from ``gen``: rooms of ``env.room``, or planned worlds of the
        configured families at their top level (in family order; counts by the shares, largest
        remainders rounded up)."""
        return self.world_source.new_rooms(n, gen)

    # ------------------------------------------------------------------------------------------
    # Internals

    def _substeps(self) -> None:
        base = self.base
        for i in range(self.env_cfg.physics_substeps):
            if base is None:
                wp.launch(
                    _body_command_to_ctrl,
                    dim=self.num_envs,
                    inputs=[self._command_wp, self.d.qpos],
                    outputs=[self.d.ctrl],
                    device=self.wp_device,
                )
            else:
                base.before_substep(i)
            mjw.step(self.m, self.d)
            if base is not None:
                base.after_substep(i)

    def _prepare_base(self) -> None:
        """Before a control step: the last command becomes the previous one, and this step's delay
        (command latency plus a fresh jitter draw) is written for the substep kernels."""
        rand, base = self.randomization, self.base
        base.end_step()
        if rand.enabled("command_latency") or rand.enabled("control_jitter"):
            delay = torch.zeros(self.num_envs, device=self.device)
            if rand.enabled("command_latency"):
                delay = delay + rand.value("command_latency", "substeps")
            if rand.enabled("control_jitter"):
                delay = delay + rand.randint(rand.value("control_jitter", "substeps"))
            base.set_delay(delay)

    def _apply_base_params(self) -> None:
        rand, base = self.randomization, self.base
        zero = torch.zeros(self.num_envs, device=self.device)
        base.set_lag(rand.value("actuator_lag", "tau") if rand.enabled("actuator_lag") else zero)
        if rand.enabled("accel_limit"):
            base.set_accel_limit(rand.value("accel_limit", "linear"), rand.value("accel_limit", "angular"))

    def _simulate(self) -> None:
        """The physics substeps, recorded once as a Warp graph and replayed every step (a CUDA graph
        on a GPU, Warp's recorded launches on the CPU): the same kernels on the same arrays, without
        the Python cost of launching each (on the CPU that cost is most of a small batch's step)."""
        if self._graph is None:
            with wp.ScopedCapture(device=self.wp_device) as capture:
                self._substeps()
            self._graph = capture.graph
        wp.capture_launch(self._graph)

    def _collided(self) -> torch.Tensor:
        """Per-world flag: a physics contact of the robot shell with penetration >= 0."""
        valid = self._contact_index < self.nacon[0]
        shell = (self.contact_geom == self.shell_id).any(dim=-1)
        hit = (valid & shell & (self.contact_dist <= 0.0)).float()
        world = self.contact_world.long().clamp(0, self.num_envs - 1)
        count = torch.zeros(self.num_envs, device=self.device).index_add_(0, world, hit)
        return count > 0

    def _context(
        self, pose: torch.Tensor, twist: torch.Tensor, prev_action: torch.Tensor, goal: torch.Tensor
    ) -> ObsContext:
        """What the robot knows; the previous action in command order, 3 wide (a diff drive's
        ``(v, w)`` as ``(v, 0, w)``, as the runtime's ``observed_action`` gives it)."""
        if self.num_actions == 2:
            prev_action = torch.stack([prev_action[:, 0], torch.zeros_like(prev_action[:, 0]), prev_action[:, 1]], -1)
        return ObsContext(scan=self.scan, pose=pose, twist=twist, goal=goal, prev_action=prev_action, dims=self.dims)

    def _reset_where(self, mask: torch.Tensor, fresh: bool) -> None:
        if fresh:
            self.rooms = self.rooms.where(mask, self.world_source.take(mask))
        m1 = mask[:, None]
        self.qpos.copy_(torch.where(m1, self.rooms.start, self.qpos))
        self.qvel.copy_(torch.where(m1, torch.zeros_like(self.qvel), self.qvel))
        self.qacc_warmstart.copy_(torch.where(m1, torch.zeros_like(self.qacc_warmstart), self.qacc_warmstart))
        self.ctrl.copy_(torch.where(m1, torch.zeros_like(self.ctrl), self.ctrl))
        self.command.copy_(torch.where(m1, torch.zeros_like(self.command), self.command))
        self.episode_length_buf.masked_fill_(mask, 0)
        self.prev_action.masked_fill_(m1, 0.0)
        start_xy = self.rooms.start[:, :2]
        self.pos_window.copy_(
            torch.where(m1[..., None], start_xy[:, None, :].expand_as(self.pos_window), self.pos_window)
        )
        first_dist = torch.linalg.norm(self.rooms.goal - start_xy, dim=-1)
        if self.follow_active:
            share = self.env_cfg.worlds.path_following
            draw = torch.rand(self.num_envs, generator=self.gen, device=self.device) < share
            self.follow = torch.where(mask, draw, self.follow)
            self.path_progress.masked_fill_(mask, 0.0)
            self.reward_progress.masked_fill_(mask, 0.0)
            first_dist = torch.where(self.follow, self.rooms.path_length, first_dist)
        self.prev_goal_dist = torch.where(mask, first_dist, self.prev_goal_dist)
        if self.randomization.active:
            self.randomization.sample(mask)
            if self.base is not None:
                self.base.reset(mask, self.qpos, self.qvel)
                self._apply_base_params()
        self._write_obstacles()

    def _write_obstacles(self) -> None:
        r = self.rooms
        z = torch.where(
            r.slot_active, torch.full_like(r.slot_yaw, OBSTACLE_HALF_HEIGHT), torch.full_like(r.slot_yaw, PARK_Z)
        )
        self.geom_xpos[:, self.slot_ids] = torch.cat([r.slot_pos, z[..., None]], dim=-1)
        c, s = torch.cos(r.slot_yaw), torch.sin(r.slot_yaw)
        zero, one = torch.zeros_like(c), torch.ones_like(c)
        mat = torch.stack([c, -s, zero, s, c, zero, zero, zero, one], dim=-1).view(self.num_envs, -1, 3, 3)
        self.geom_xmat[:, self.slot_ids] = mat

    def _observe(self, contact: torch.Tensor) -> None:
        pose = self.pose()
        twist = self.body_twist()
        obs_pose, obs_twist = self._observed_state(pose, twist)
        lidar_pose = obs_pose
        rand = self.randomization
        if rand.enabled("lidar_yaw"):
            lidar_pose = obs_pose.clone()
            lidar_pose[:, 2] += torch.deg2rad(rand.value("lidar_yaw", "deg"))
        if lidar_pose is not pose:  # the truth is cast from the true pose, the policy's scan not
            self.scan_clean = self.lidar.fill(self.lidar.scan(pose))
        # Sector minima (env.lidar.rays_per_beam sub-rays each); outside the field of view the
        # runtime's fill, applied after the noise as the robot fills from its noisy readings.
        raw = self.lidar.scan(lidar_pose)
        self.scan, self.scan_readings = self.lidar_faults.apply(raw, self.noise_gen)  # base noise without terms
        self.scan_seen = self._seen(self.scan_readings)
        if lidar_pose is pose:
            self.scan_clean = self.lidar.fill(raw)
        dist, direction = self.geometry.nearest(self.rooms, pose[:, None, :2])
        c, s = torch.cos(pose[:, 2]), torch.sin(pose[:, 2])
        dx, dy = direction[:, 0, 0], direction[:, 0, 1]
        truth = SimTruth(
            clearance=dist[:, 0] - self.radius,
            scan_clean=self.scan_clean,
            contact=contact.float(),
            nearest_dir_body=torch.stack([c * dx + s * dy, -s * dx + c * dy], dim=-1),
        )
        self.observed_pose, self.observed_twist = obs_pose, obs_twist
        goal = self.rooms.goal
        if self.follow_active:
            sub, self.path_progress, _ = follow_path(
                self.rooms.path, self.rooms.path_count, obs_pose[:, :2], self.path_progress, self.lookahead
            )
            if self.stages.guard is not None:  # as the node's gate: a sub-goal the guard cuts short is turned
                sub = open_subgoal(
                    self.rooms.path,
                    self.rooms.path_count,
                    obs_pose,
                    self.path_progress,
                    sub,
                    self.lookahead,
                    self.scan,
                    self.scan_seen,
                    self.stages.guard,
                    self.dims.v_max,
                    self.dims.max_range,
                )
            goal = torch.where(self.follow[:, None], sub, goal)
        self.policy_goal = goal
        ctx = self._context(obs_pose, obs_twist, self.prev_action, goal)
        self.obs_buf = self.obs_manager.compute(ctx, truth)

    def _seen(self, readings: torch.Tensor) -> torch.Tensor | None:
        """(N, B) the beams the policy's scan saw: inside the field of view, with a reading (not
        dropped out: NaN in ``readings``); None when every beam always is (the guard's rule step 0
        then has nothing to do)."""
        dropout = self.lidar_faults.active and self.randomization.enabled("lidar_dropout")
        if self.sector_rays.full_view and not dropout:
            return None
        seen = self.fov_seen.expand(self.num_envs, -1)
        return seen & ~torch.isnan(readings) if dropout else seen

    def _observed_state(self, pose: torch.Tensor, twist: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The odometry the policy sees: ``observation_latency`` substeps old, twist scaled and noisy."""
        rand = self.randomization
        if rand.enabled("observation_latency"):
            pose, twist = self.base.observed(rand.value("observation_latency", "substeps"))
        if rand.enabled("odom_twist"):
            scale = rand.value("odom_twist", "scale")[:, None]
            std = rand.value("odom_twist", "noise_std")[:, None]
            twist = scale * twist + std * rand.randn(self.num_envs, 3)
        return pose, twist

    def _family_log(
        self, ended: torch.Tensor, success: torch.Tensor, collision: torch.Tensor
    ) -> dict[str, torch.Tensor]:
        """Success and collision of the episodes ending now, per world family (``Family/<name>/...``)."""
        fam = self.rooms.family[ended]
        counts = torch.bincount(fam, minlength=len(FAMILIES)).tolist()
        log: dict[str, torch.Tensor] = {}
        for i, name in enumerate(FAMILIES):
            if counts[i]:
                mine = ended[fam == i]
                log[f"Family/{name}/success"] = success[mine].float()
                log[f"Family/{name}/collision"] = collision[mine].float()
        return log

    @staticmethod
    def _episode_log(
        ended: torch.Tensor, reasons: dict[str, torch.Tensor], sums: dict[str, torch.Tensor], length_s: torch.Tensor
    ) -> dict[str, torch.Tensor]:
        """rsl_rl's ``extras["log"]``: one value per episode ending now (``ended``: their worlds)."""
        log = {f"Episode_Reward/{name}": value[ended] for name, value in sums.items()}
        log.update({f"Episode_Termination/{name}": flag[ended].float() for name, flag in reasons.items()})
        log["Episode/length_s"] = length_s[ended]
        return log
