"""A classical baseline on the policy's interface: a dynamic-window planner for either drive.

Numpy only. :class:`DwaPlanner` is built from the same :class:`~navcontract.bundle.Contract` as
:class:`~navdeploy.runtime.PolicyRuntime` (limits, control period, goal tolerance, lidar beams and
max range, robot radius when the contract carries it) and has the same call::

    planner = DwaPlanner(contract, DwaParams.from_yaml())   # defaults: navdeploy/dwa.yaml
    cmd = planner.step(scan, pose, twist, goal)              # np.ndarray (3,) [vx, vy, wz], SI, body
    planner.reset()                                          # new goal or new episode

One step:

1. The scan goes through :func:`navcontract.scan.resample_scan` (the runtime's rule and options),
   then every sector that reads less than the max range becomes one obstacle point in the body
   frame, on the training beam angles of the contract. Points out of reach of every trajectory
   (further than the longest trajectory plus the clearance cap) are dropped.
2. The dynamic window is the box ``centre +- (a_lin, a_lin, a_ang) * control_period`` intersected
   with the limits (the planar norm too, when the contract limits it). For a diff-drive base
   (the contract's ``action.drive``) the window has no lateral axis: ``vy`` is 0, ``vx`` lies in
   ``[-v_backward, v_max]``, and the samples are ``(v, w)`` pairs, whose trajectories are unicycle
   arcs. The centre is the previous
   command: the planner's own, or behind the command gate the one that went out
   (:meth:`DwaPlanner.command_sent`: after the gate's smoother and guard, so a command the guard cut
   is not taken for one the base follows, and the window stays on it, as the gate's smoother does,
   however far the lagging measured twist is); after :meth:`DwaPlanner.reset`, or, without a gate,
   when the measured twist is more than ``resync_windows`` windows away from the previous command
   (the base is not following), it is the measured body twist. Hence consecutive commands differ
   by at most ``a * control_period`` per component while the base follows its commands. Behind the
   gate ``a`` is at most the smoother's limit (:meth:`DwaPlanner.configure_accel`), so the smoother
   passes the pick unchanged.
3. The window is sampled on an ``n_vx x n_vy x n_wz`` grid (``n_vy`` counts as 1, at ``vy = 0``,
   for a diff-drive base; plus the centre and the braking command). Each sample is held as a constant body-frame twist for ``horizon_s`` (an arc,
   closed form), evaluated every ``check_dt`` seconds.
4. A trajectory is admissible when its centre stays at least ``safe_distance + margin_per_speed *
   planar speed`` from every scan point at every evaluated time after the start (or, when the
   robot is already closer than that, never gets closer than it is now). The horizon must cover
   braking from full speed plus one period (``horizon_s >= v / a_lin + control_period`` for the
   larger of the forward and backward limits, checked): a clear arc then leaves room to stop along it.
   **One rule with the guard.** With a guard (:attr:`DwaPlanner.guard`: the contract's, or the one
   the command gate applies, handed over by :meth:`DwaPlanner.configure_guard`) ``safe_distance`` is
   the guard's passing clearance on the contract's beams
   (:meth:`navcontract.guard.GuardRule.passing_clearance`), and each sample is first scaled as the
   guard scales it on this very scan (:func:`navcontract.guard.guard_scale`, unseen sectors occupied,
   rule step 0; its turn capped by rule step 0b, :func:`navcontract.guard.sight_turned`, when the
   guard keeps near returns in sight): the planner weighs the motions the guard lets out (a creep
   where the guard allows only a creep, a slower turn where it holds a turn), never asks for a gap or a speed the guard refuses, nor refuses a gap the guard
   lets the robot through. Without a guard
   ``safe_distance`` is ``robot_radius + safety_margin``, and **unseen is occupied** all the same: a
   sample is admissible only when its planar velocity is one :func:`unseen_rule` (the planner's
   radius and safety margin) allows toward the sectors the scan did not see (outside the lidar's
   field of view, or filled for lack of a reading: the scan report's ``filled``), each counted as a
   return at ``radius + margin + unseen_clearance``, and (rule step 0b) a turn faster than that rule
   lets a near return turn out of sight is not admissible either. So the planner never picks a
   motion into a blind sector.
5. Admissible trajectories are scored: ``w_progress * progress + w_heading * heading +
   w_clearance * clearance + w_speed * speed`` (each term in [-1, 1] or [0, 1], see
   :meth:`DwaPlanner.evaluate`). The best one's twist is the command.
6. With no admissible trajectory the command brakes: each component moves toward zero by at most
   its window half-width. Within the goal tolerance the command brakes as well.

The command is finally clamped to the contract's limits (per component, then the planar norm; a
diff-drive command to ``[-v_backward, v_max] x {0} x [-omega_max, omega_max]``), like
:func:`navcontract.action.action_to_command` does for the policy.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from navcontract.base import DIFF_DRIVE
from navcontract.bundle import Contract
from navcontract.guard import GuardRule, guard_scale, sight_turned
from navcontract.scan import ScanInput, ScanOptions, ScanUnusable
from navdeploy.runtime import ContractScanReader, finite_vector

__all__ = ["DEFAULT_PARAMS_FILE", "DwaConfigError", "DwaParams", "DwaPlanner", "ScanUnusable", "contract_radius"]

DEFAULT_PARAMS_FILE = Path(__file__).with_name("dwa.yaml")


class DwaConfigError(ValueError):
    """A DWA parameters file or value is invalid (unknown key, wrong type, out of range)."""


@dataclass(frozen=True)
class DwaParams:
    """Planner parameters; the documented defaults live in ``navdeploy/dwa.yaml``."""

    a_lin: float = 3.0
    a_ang: float = 4.0
    horizon_s: float = 0.8
    check_dt: float = 0.1
    n_vx: int = 7
    n_vy: int = 7
    n_wz: int = 5
    safety_margin: float = 0.05
    margin_per_speed: float = 0.05
    robot_radius: float = 0.2
    clearance_cap: float = 1.0
    w_progress: float = 1.0
    w_heading: float = 0.1
    w_clearance: float = 0.3
    w_speed: float = 0.3
    resync_windows: float = 3.0
    path_lookahead_s: float = 1.0

    def __post_init__(self) -> None:
        positive = ("a_lin", "a_ang", "horizon_s", "check_dt", "robot_radius", "clearance_cap", "resync_windows")
        for name in positive:
            v = getattr(self, name)
            if not (math.isfinite(v) and v > 0):
                raise DwaConfigError(f"dwa parameter '{name}' must be a finite number > 0, got {v!r}")
        for name in (
            "safety_margin",
            "margin_per_speed",
            "w_progress",
            "w_heading",
            "w_clearance",
            "w_speed",
            "path_lookahead_s",
        ):
            v = getattr(self, name)
            if not (math.isfinite(v) and v >= 0):
                raise DwaConfigError(f"dwa parameter '{name}' must be a finite number >= 0, got {v!r}")
        for name in ("n_vx", "n_vy", "n_wz"):
            v = getattr(self, name)
            if not (1 <= v <= 41):
                raise DwaConfigError(f"dwa parameter '{name}' must be an integer in [1, 41], got {v!r}")
        if self.check_dt > self.horizon_s:
            raise DwaConfigError(f"dwa parameter 'check_dt' ({self.check_dt}) exceeds 'horizon_s' ({self.horizon_s})")

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None, where: str = "dwa") -> DwaParams:
        """Typed parameters from plain data; an unknown key raises naming it."""
        data = data or {}
        if not isinstance(data, dict):
            raise DwaConfigError(f"{where}: the top level must be a mapping, got {type(data).__name__}")
        fields = {f.name: f for f in dataclasses.fields(cls)}
        kwargs: dict[str, Any] = {}
        for key, value in data.items():
            if key not in fields:
                raise DwaConfigError(f"{where}: unknown key '{key}' (known: {', '.join(fields)})")
            default = fields[key].default
            if isinstance(default, int):
                if isinstance(value, bool) or not isinstance(value, int):
                    raise DwaConfigError(f"{where}: '{key}' must be an integer, got {value!r}")
                kwargs[key] = value
            else:
                if isinstance(value, str):
                    try:  # PyYAML reads 1e-3 (no dot) as a string
                        value = float(value)
                    except ValueError:
                        pass
                if isinstance(value, bool) or not isinstance(value, (int, float)):
                    raise DwaConfigError(f"{where}: '{key}' must be a number, got {value!r}")
                kwargs[key] = float(value)
        try:
            return cls(**kwargs)
        except DwaConfigError as err:
            raise DwaConfigError(f"{where}: {err}") from None

    @classmethod
    def from_yaml(cls, path: str | Path | None = None) -> DwaParams:
        """Load ``path`` (default: the ``dwa.yaml`` beside this module)."""
        import yaml

        p = Path(path) if path is not None else DEFAULT_PARAMS_FILE
        if not p.is_file():
            raise DwaConfigError(f"dwa parameters file not found: {p}")
        return cls.from_dict(yaml.safe_load(p.read_text()), where=str(p))

    def replace(self, **changes: Any) -> DwaParams:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def contract_radius(contract: Contract) -> float | None:
    """The footprint radius of the contract's base (``Contract.base``, ``robot.radius``), or None when
    it states none (the planner then keeps :attr:`DwaParams.robot_radius`)."""
    base = getattr(contract, "base", None)
    c = None if base is None else base.radius
    if isinstance(c, int | float) and not isinstance(c, bool) and math.isfinite(c) and c > 0:
        return float(c)
    return None


UNSEEN_HEADWAY = 0.5
"""[s] The time headway of the planner's unseen rule when the contract carries no guard (the
training config's ``env.guard.headway``)."""


def unseen_rule(contract: Contract, robot_radius: float, params: DwaParams) -> GuardRule:
    """The guard rule the planner keeps unseen sectors with: the contract's guard (its unseen
    clearance included) when it carries one, else the planner's radius and ``safety_margin``,
    :data:`UNSEEN_HEADWAY`, braking at ``a_lin`` and :data:`navcontract.guard.UNSEEN_CLEARANCE`."""
    trained = getattr(contract, "guard", None)
    if trained is not None:
        return trained
    return GuardRule(
        radius=robot_radius, margin=params.safety_margin, headway=UNSEEN_HEADWAY, decel=params.a_lin, slide=False
    )


def arc_poses(twists: np.ndarray, times: np.ndarray) -> np.ndarray:
    """Poses (S, T, 3) [x, y, yaw] reached from the origin by holding body twists (S, 3) for
    ``times`` (T,) seconds (exact integration of a constant body-frame twist)."""
    vx, vy, wz = (twists[:, i : i + 1] for i in range(3))
    t = times[None, :]
    th = wz * t
    small = np.abs(wz) < 1e-6
    wsafe = np.where(small, 1.0, wz)
    # sin(w t)/w and (1 - cos(w t))/w, with their series near w = 0.
    s_over = np.where(small, t - wz * wz * t**3 / 6.0, np.sin(th) / wsafe)
    c_over = np.where(small, wz * t * t / 2.0, (1.0 - np.cos(th)) / wsafe)
    x = vx * s_over - vy * c_over
    y = vx * c_over + vy * s_over
    return np.stack([x, y, th], axis=-1)


class DwaPlanner(ContractScanReader):
    """Dynamic-window planner with :class:`~navdeploy.runtime.PolicyRuntime`'s ``step`` signature."""

    def __init__(
        self,
        contract: Contract,
        params: DwaParams | None = None,
        scan_options: ScanOptions | None = None,
    ) -> None:
        self.contract = contract
        self.params = params if params is not None else DwaParams.from_yaml()
        self.scan_options = scan_options or ScanOptions()
        p = self.params
        radius = contract_radius(contract)
        self.radius_source = "contract" if radius is not None else "params"
        self.robot_radius = radius if radius is not None else p.robot_radius
        self.guard: GuardRule | None = None  # set with unseen and safe_distance by configure_guard
        self.configure_guard(getattr(contract, "guard", None))
        scaling = contract.scaling
        self.holonomic = scaling.drive != DIFF_DRIVE
        self.v_max = float(scaling.v_max)
        # [m] The sub-goal along a path this planner drives to (None: the bundle's, as the policy's).
        self.path_lookahead = self.params.path_lookahead_s * self.v_max if self.params.path_lookahead_s > 0 else None
        self.v_backward = float(scaling.backward) if not self.holonomic else self.v_max
        self.omega_max = float(scaling.omega_max)
        self.limit_planar = bool(scaling.limit_planar_speed)
        self.period = float(contract.control_period)
        v_lateral = self.v_max if self.holonomic else 0.0
        self.lower = np.array([-self.v_backward, -v_lateral, -self.omega_max])
        self.upper = np.array([self.v_max, v_lateral, self.omega_max])
        fastest = max(self.v_max, self.v_backward)
        need = fastest / p.a_lin + self.period
        if p.horizon_s < need - 1e-9:
            raise DwaConfigError(
                f"dwa parameter 'horizon_s' ({p.horizon_s}) is shorter than braking from full speed plus one period "
                f"(v / a_lin + control_period = {need:.3f} s at {fastest:g} m/s)"
            )
        self.half_window = np.array([p.a_lin, p.a_lin if self.holonomic else 0.0, p.a_ang]) * self.period
        n_checks = max(1, int(math.ceil(p.horizon_s / p.check_dt - 1e-9)))
        self.times = np.linspace(p.horizon_s / n_checks, p.horizon_s, n_checks)
        angles = float(contract.angle_min) + np.arange(contract.num_beams) * float(contract.angle_increment)
        self._beam_cs = np.stack([np.cos(angles), np.sin(angles)], axis=-1)
        self._grid = self._unit_grid()
        self._prev: np.ndarray | None = None
        self._told = False  # a gate reports the commands that went out (command_sent): no resync
        self.last_info: dict[str, Any] = {}

    # ------------------------------------------------------------------------------------------

    def configure_guard(self, rule: GuardRule | None) -> None:
        """Keep ``rule``, the guard the command will be checked by (the gate's; None: no guard, the
        planner's own ``robot_radius + safety_margin`` and :func:`unseen_rule`), in every sample from now
        on (module doc, step 4)."""
        self.guard = rule
        if rule is None:
            self.unseen = unseen_rule(self.contract, self.robot_radius, self.params)
            self.safe_distance = self.robot_radius + self.params.safety_margin
        else:
            self.unseen = rule
            self.safe_distance = rule.passing_clearance(int(self.contract.num_beams))

    def configure_accel(self, limits: Any) -> None:
        """Keep the window within the command gate's velocity smoother (``limits``: its
        :class:`~navdeploy.smoother.AccelLimits`; an axis it leaves unlimited keeps ``a_lin`` /
        ``a_ang``): a window the smoother would cut picks commands that never go out as picked."""
        p = self.params
        lin = p.a_lin if limits.linear is None else min(p.a_lin, float(limits.linear))
        ang = p.a_ang if limits.angular is None else min(p.a_ang, float(limits.angular))
        self.half_window = np.array([lin, lin if self.holonomic else 0.0, ang]) * self.period

    def command_sent(self, cmd: Any) -> None:
        """The command that went out this tick (the gate's, after its smoother and guard; a zero when it
        stopped the robot): the next window is centred on it, not on what the planner asked for."""
        c = np.asarray(cmd, dtype=np.float64).reshape(-1)
        if c.shape == (3,) and np.all(np.isfinite(c)):
            self._prev = self.clamp(c)
            self._told = True

    def reset(self) -> None:
        """Forget the previous command: the next window is centred on the measured twist."""
        self._prev = None
        self.last_info = {}

    @property
    def prev_command(self) -> np.ndarray | None:
        return None if self._prev is None else self._prev.copy()

    def _unit_grid(self) -> np.ndarray:
        """The (S, 3) sample grid on [-1, 1] per window axis (a diff drive's lateral axis: 0 only)."""
        p = self.params
        n_vy = p.n_vy if self.holonomic else 1
        axes = [np.linspace(-1.0, 1.0, n) if n > 1 else np.zeros(1) for n in (p.n_vx, n_vy, p.n_wz)]
        g = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, 3)
        return g

    def clamp(self, cmd: np.ndarray) -> np.ndarray:
        """Clamp a command to the contract's limits (components, then the planar norm; a diff drive's
        ``vy`` to 0)."""
        c = np.asarray(cmd, dtype=np.float64).reshape(3).copy()
        c[~np.isfinite(c)] = 0.0
        c = np.clip(c, self.lower, self.upper)
        if not self.holonomic:
            c[1] = 0.0
        if self.limit_planar:
            speed = math.hypot(c[0], c[1])
            if speed > self.v_max:
                c[0:2] *= self.v_max / speed
        return c

    def scan_points(self, ranges: np.ndarray) -> np.ndarray:
        """Body-frame (M, 2) obstacle points: the sectors with a return (below the max range)."""
        hit = ranges < self.contract.max_range - 1e-6
        return ranges[hit, None] * self._beam_cs[hit]

    def window(self, twist: np.ndarray) -> np.ndarray:
        """The window's centre (3,): previous command, or the measured twist (clamped)."""
        meas = self.clamp(twist)
        if self._prev is None:
            return meas
        if self._told:  # the gate's smoother starts from what went out too
            return self._prev.copy()
        if np.any(np.abs(meas - self._prev) > self.params.resync_windows * self.half_window):
            return meas
        return self._prev.copy()

    def candidates(self, centre: np.ndarray) -> np.ndarray:
        """(S, 3) twists in the window around ``centre`` and within the limits."""
        lo = np.maximum(centre - self.half_window, self.lower)
        hi = np.minimum(centre + self.half_window, self.upper)
        mid, half = 0.5 * (lo + hi), 0.5 * (hi - lo)
        samples = mid + self._grid * half
        samples = np.concatenate([samples, centre[None, :], self.brake(centre)[None, :]], axis=0)
        if self.limit_planar:
            ok = np.hypot(samples[:, 0], samples[:, 1]) <= self.v_max + 1e-9
            samples = samples[ok]
        return samples

    def brake(self, centre: np.ndarray) -> np.ndarray:
        """Each component toward zero by at most its window half-width."""
        return centre - np.clip(centre, -self.half_window, self.half_window)

    def guarded(self, samples: np.ndarray, ranges: np.ndarray, seen: np.ndarray | None) -> np.ndarray:
        """(S, 3) each sample as the guard of :attr:`guard` lets it out on ``ranges`` (the contract's
        beams, unseen sectors occupied): its planar part scaled by :func:`navcontract.guard.guard_scale`,
        ``wz`` as rule step 0b leaves it (step 4 of the module docstring). A scaled sample is one the
        guard leaves as it is: its cap is its speed, and a slower turning command sweeps no wider a fan."""
        if self.guard is None:
            return samples
        n = samples.shape[0]
        if self.guard.keep_sight and seen is not None and not seen.all():
            samples = np.asarray(sight_turned(ranges, samples, self.guard, seen))
        scale = guard_scale(
            np.broadcast_to(ranges, (n, ranges.shape[0])),
            samples,
            self.guard,
            float(self.contract.max_range),
            None if seen is None else np.broadcast_to(seen, (n, seen.shape[0])),
        )
        out = samples.copy()
        out[:, :2] *= np.asarray(scale, dtype=np.float64)[:, None]
        return out

    def unseen_ok(self, samples: np.ndarray, seen: np.ndarray | None, ranges: np.ndarray) -> np.ndarray:
        """(S,) without a guard: whether :func:`unseen_rule` leaves each sample's planar velocity as it
        is toward the sectors the scan did not see, and its turn as it is near them on ``ranges``
        (rule steps 0 and 0b; step 4 of the module docstring; with a guard the samples are
        :meth:`guarded` instead, which covers them)."""
        if self.guard is not None or seen is None or seen.all():
            return np.ones(samples.shape[0], dtype=bool)
        max_range = float(self.contract.max_range)
        free = np.full(seen.shape[0], max_range)  # seen sectors: nothing here
        scale = guard_scale(free, samples, self.unseen, max_range, seen)
        ok = np.asarray(scale) >= 1.0 - 1e-6
        if self.unseen.keep_sight:  # rule step 0b on the scan itself: no near return turned out of sight
            held = np.asarray(sight_turned(ranges, samples, self.unseen, seen))
            ok &= held[:, 2] == samples[:, 2]
        return ok

    def evaluate(
        self, samples: np.ndarray, ranges: np.ndarray, goal_body: np.ndarray, seen: np.ndarray | None = None
    ) -> dict[str, np.ndarray]:
        """Admissibility and score terms of each sample (vectorised over samples x times x points) on
        the scan ``ranges`` (the contract's beams, metres); ``seen``: the sectors the scan saw (None:
        every one), the others occupied. With a guard each sample is first the one the guard lets out
        (:meth:`guarded`; ``samples`` of the result), else a sample toward unseen sectors is not
        admissible (:meth:`unseen_ok`).

        - progress: (d_goal_now - closest goal distance along the arc) / (v_max * horizon), in
          [-1, 1] (an arc through the goal earns it fully, whatever it does afterwards);
        - heading: (1 + cos(final yaw - bearing of the goal from the end point)) / 2, in [0, 1];
        - clearance: clip((min centre-to-point distance - radius) / clearance_cap, 0, 1);
        - speed: the planar velocity's component toward the goal / v_max, clipped at 0, in [0, 1]:
          speed never pays for driving across or away from the goal, so a blocked robot stops
          instead of roaming.
        """
        p = self.params
        samples = self.guarded(samples, ranges, seen)
        points = self.scan_points(ranges)
        poses = arc_poses(samples, self.times)  # (S, T, 3)
        xy = poses[..., :2]
        s, t = xy.shape[:2]
        reach = max(self.v_max, self.v_backward) * p.horizon_s + self.safe_distance + p.clearance_cap
        if points.shape[0]:
            near = points[np.einsum("ij,ij->i", points, points) <= reach * reach]
        else:
            near = points
        if near.shape[0]:
            flat = xy.reshape(-1, 2)
            d2 = (
                np.einsum("ij,ij->i", flat, flat)[:, None]
                + np.einsum("ij,ij->i", near, near)[None, :]
                - 2.0 * flat @ near.T
            )
            dmin_t = np.sqrt(np.maximum(d2.min(axis=1), 0.0)).reshape(s, t)  # (S, T)
            dmin = dmin_t.min(axis=1)
            d_now = float(np.sqrt(np.einsum("ij,ij->i", near, near).min()))
        else:
            dmin = np.full(s, np.inf)
            d_now = math.inf
        speed = np.hypot(samples[:, 0], samples[:, 1])
        safe = self.safe_distance + p.margin_per_speed * speed
        threshold = np.minimum(safe, d_now - 1e-9)
        admissible = (dmin >= threshold) & self.unseen_ok(samples, seen, ranges)
        end = xy[:, -1, :]
        d_goal_now = float(np.hypot(goal_body[0], goal_body[1]))
        to_goal = goal_body[None, :] - end
        d_goal_all = np.hypot(goal_body[0] - xy[..., 0], goal_body[1] - xy[..., 1])
        progress = (d_goal_now - d_goal_all.min(axis=1)) / (self.v_max * p.horizon_s)
        bearing = np.arctan2(to_goal[:, 1], to_goal[:, 0])
        heading = 0.5 * (1.0 + np.cos(poses[:, -1, 2] - bearing))
        clearance = np.clip((dmin - self.robot_radius) / p.clearance_cap, 0.0, 1.0)
        g_dir = goal_body / max(d_goal_now, 1e-9)
        speed = np.maximum(samples[:, 0] * g_dir[0] + samples[:, 1] * g_dir[1], 0.0) / self.v_max
        score = p.w_progress * progress + p.w_heading * heading + p.w_clearance * clearance + p.w_speed * speed
        return {
            "samples": samples,
            "admissible": admissible,
            "score": score,
            "progress": progress,
            "heading": heading,
            "clearance": clearance,
            "speed": speed,
            "min_distance": dmin,
        }

    def step(self, scan: ScanInput, pose: Any, twist: Any, goal: Any) -> np.ndarray:
        """Scan, odometry pose (x, y, yaw), body twist (vx, vy, wz), goal (gx, gy) in the odometry
        frame -> (3,) body-frame command [vx, vy, wz] in m/s, m/s, rad/s.

        Raises ScanUnusable (before touching any state) when the scan carries no information, and
        ValueError for a malformed or non-finite pose, twist or goal.
        """
        ranges = self.resample(scan)
        x, y, yaw = finite_vector(pose, 3, "pose")
        tw = finite_vector(twist, 3, "twist")
        gx, gy = finite_vector(goal, 2, "goal")
        c, s = math.cos(yaw), math.sin(yaw)
        dx, dy = gx - x, gy - y
        goal_body = np.array([c * dx + s * dy, -s * dx + c * dy])
        centre = self.window(tw)
        if math.hypot(dx, dy) < self.contract.goal_tolerance:
            cmd = self.brake(centre)
            info: dict[str, Any] = {"mode": "goal_reached", "n_samples": 0, "n_admissible": 0}
        else:
            samples = self.candidates(centre)
            report = self.last_scan_report
            seen = None if report is None else ~np.asarray(report.filled, dtype=bool)
            ev = self.evaluate(samples, ranges, goal_body, seen)
            ok = ev["admissible"]
            if ok.any():
                score = np.where(ok, ev["score"], -np.inf)
                best = int(np.argmax(score))
                cmd = ev["samples"][best]
                info = {"mode": "track", "score": float(score[best])}
            else:
                cmd = self.brake(centre)
                info = {"mode": "brake"}
            info.update(n_samples=int(samples.shape[0]), n_admissible=int(ok.sum()))
        cmd = self.clamp(cmd)
        self._prev = cmd.copy()
        self.last_info = info
        return cmd.copy()

    def goal_reached(self, pose: Any, goal: Any) -> bool:
        """Within the contract's goal tolerance (the simulator's success radius)."""
        p = finite_vector(pose, 3, "pose")
        g = finite_vector(goal, 2, "goal")
        return bool(np.hypot(g[0] - p[0], g[1] - p[1]) < self.contract.goal_tolerance)
