"""Collision guard: slow the planar command so the robot can stop before what its scan shows.

The guard only ever scales the planar part ``(vx, vy)`` of a command down, keeping its direction,
and lowers ``wz`` only to keep a near return in sight (rule step 0b: the shell is a cylinder, so
turning in place cannot hit anything, but it can turn a post out of the lidar's view). It reads
the same ``num_beams`` ranges the policy observed (metres, the scan rule of :mod:`navcontract.scan`),
so training (torch, batched over worlds) and the robot (numpy, one robot) apply the very same rule
to the very same numbers. Like Nav2's collision monitor in its approach mode, but on the policy's
own scan and trained with.

**Stage: last.** The guard checks the command that will be sent: the driver's command clamped to
the limits, on a holonomic base turned by the guard's steering (``steer`` > 0: toward the direction
these same steps let out fastest, :mod:`navcontract.steer`), then acceleration-limited by the
velocity smoother (when one runs), then guarded. A
cut by the guard goes out as it is, even when it is a bigger change than the smoother allows (a
stop is never delayed), and the smoother remembers the guarded command as the one sent. The
command gate (``navdeploy.gate``) and the simulator (``navsim.actuation.CommandStages``) apply
this order; the contract's section says so (``"stage": "last"``), and ``after_smoother`` says
whether training ran the smoother before the guard (``env.smoother``).

The rule, per world, for a planar command ``v`` of speed ``s = |v|`` in direction ``u``:

0. **Unseen is occupied.** A beam whose sector the scan did not see (``seen`` false: outside the
   lidar's field of view, or a sector the scan rule filled for lack of a valid reading) counts as
   a return at ``min(r_j, radius + margin + unseen_clearance)``: as if something stood just beyond
   the margin, wherever the fill put it. A motion whose swept band (step 2, any direction of the
   fan of step 2b) meets such a return ahead is not allowed at all (scale 0): nothing is known
   there, so no speed is safe, however slow (a robot creeping backward into its blind sector
   touches the post that stands there). Motion away from the blind side, or past it outside the
   band, is not limited by it. The rule only ever lowers a range or a speed, so the guard with it
   never allows more than without it.

   0b. **A near return stays in sight** (``keep_sight``). By translation alone a return enters the
   blind sector of the shipped 270-degree layout no nearer than ``radius + margin +
   unseen_clearance`` (the reason for :data:`UNSEEN_CLEARANCE`); by turning, at any range, and step
   0 would then put it further away than it is. So a seen return nearer than
   :attr:`GuardRule.unseen_range` limits the yaw rate toward the side that carries it out of sight.
   Turning by ``+Delta`` moves every return's body angle by ``-Delta``; a return in sector ``j``
   (anywhere on its arc) can turn by ``g_j = 2 delta n_j`` before it reaches an unseen sector,
   ``n_j`` the seen sectors between them on that side. The yaw rate that way is capped at ``min_j
   g_j / h`` (``h`` the time headway of step 3): the angle left closes as the free distance of step
   3 does, and with ``T / h <= 1/e`` it never reaches zero. A near return next to an unseen sector
   holds every turn toward it; turning the other way is not limited by it, nor is any planar motion.
   A scan without unseen sectors leaves ``wz`` as it is, bit for bit. The capped ``wz`` is the one
   steps 2b and 5 judge.

1. Each beam ``j`` is a point at its range ``r_j`` and angle ``theta_j`` (body frame). Its value is
   the nearest return in its sector of width ``2 delta`` (``delta`` = half the beam increment), so
   the obstacle may lie anywhere on that arc: the point is inflated to a disc of radius
   ``rho_j = radius + margin + r_j sin(delta)``. A seen beam at ``max_range`` or beyond (no
   return) blocks nothing.

   1b. With ``slide``, a return inside the margin (or within
   ``SLIDE_EPS`` of it) keeps only what is left of its gap: ``rho_j = min(rho_j, max(r_j - SLIDE_EPS,
   radius + r_j sin(delta)))``. A motion that passes it no closer than ``r_j - SLIDE_EPS`` is
   free; one toward it gets a free distance of at most ``SLIDE_EPS`` (step 2), so inside the
   margin the robot closes in at no more than ``SLIDE_EPS / headway`` (2 cm/s at 0.5 s), and never
   nearer than the shell plus the spread. Without ``slide`` every motion with a forward component
   toward such a return is stopped, so a robot that had crept into the margin beside a post could
   not slide past it, only back away (a policy pushing along it stood still).

2. The robot centre sweeping along ``u`` meets that disc after the free distance
   ``d_j = a_j - sqrt(rho_j^2 - l_j^2)``, where ``a_j`` and ``l_j`` are the point's along-track and
   cross-track offsets; a point behind the robot (``a_j <= 0``) or off the swept band
   (``l_j >= rho_j``) blocks nothing. ``D = min_j d_j`` (negative when a point is already inside
   the band ahead: then no motion toward it is allowed). "Behind" means ``a_j <= ALONG_EPS``.

   2b. **Turning.** A body-frame command ``(vx, vy, wz)`` held by a turning robot drives it along
   an arc: the chord to where it stands after turning by ``Delta`` points ``Delta / 2`` off ``u``.
   Until it can have stopped (``t_stop = reaction + s / decel``) the robot turns by up to ``wz
   t_stop``, so ``D`` is the least free distance over a fan of directions ``u`` turned by ``0 ..
   wz t_stop / 2``, at most :data:`TURN_STEP` apart (one direction when ``wz = 0``). A robot that
   sweeps sideways while spinning thus sees the posts its arc meets, not only those on its tangent.
3. The speed cap for ``D > 0`` is ``min(D / h, b(D))``, else 0. ``T = reaction`` is the time
   between the scan a command is judged on and the base braking: the control period the command is
   held for, the delays of scan and command, and the actuator's lag (:func:`reaction_time`).

   - ``h = max(headway, e T)`` is the time headway to the nearest blocking return. A speed
     proportional to the free distance reaches the base ``T`` late: the distance then obeys
     ``D'(t) = -D(t - T) / h``, which comes to rest without crossing zero exactly when ``T / h <=
     1/e``. With ``h = headway`` alone (0.5 s) and the trained worst response (``T`` = 0.32 s) a robot
     driven at a post overshoots its margin by several centimetres and touches it.
   - ``b(D)`` is the speed ``v`` with ``v T + v^2 / (2 decel) = D``: held for the reaction time and
     then braked at ``decel``, the robot stops before the return (:func:`braking_speed`; ``sqrt(2
     decel D)`` for ``T = 0``). It binds on bases that brake slowly.

4. ``scale = min(1, cap / s)`` (1 for ``s = 0``); the command becomes ``[scale vx, scale vy, wz]``.

5. **Momentum** (``momentum``, given the measured body twist ``m``: odometry on the robot, the
   observed twist in training). Steps 1-4 judge the command's direction, but the base still moves
   as it did and reaches the command only over its acceleration: after a cut beyond the smoother,
   or a command that turns the planar direction, its velocity sweeps from ``m`` to the command
   ``c`` (as scaled by step 4) through directions neither points in. Steps 0-2 are applied to
   :data:`MOMENTUM_SAMPLES` velocities ``v = (1 - a) m + a c`` (``a`` from 0 to 1). When one on
   the way (``a > 0``) is faster than ``b(D_v) + (1 - a)`` :data:`MOMENTUM_TOLERANCE` (at that velocity the
   robot could no longer stop before the return along it, braking at ``decel`` after the reaction
   time) and ``m`` itself is not, the planar command is zero: the base brakes from where it is,
   along a motion it can still stop. When ``m`` itself can no longer stop, braking along it helps
   less than the command (which turns away, or brakes too), and the command goes out as steps 1-4
   scaled it. At rest the samples are the command's own direction, which step 4 already keeps below
   ``b``; the tolerance keeps odometry noise from tripping it, and ``b`` (not the headway cap) keeps
   an ordinary approach, in which the base lags the guard's cap, from tripping it. A stop frees the
   robot again once its speed has come down. With ``sweep_lag`` > 0 each velocity on the way is also
   judged from where the robot will be when a base following the command with that first-order lag
   gets to it (:func:`sweep_travel`), the nearer free distance counting: the base keeps moving while
   its velocity turns, and a command that swings fast past a return near it sweeps the velocity
   through it from closer than the robot is now. The lag only ever stops more; 0 (a section without
   the key) is revision 2 exactly.

   5b. **A base that limits acceleration per axis** (``axis_brake``). The robot's velocity smoother
   and the simulated base limit the change of ``vx`` and ``vy`` each by the same rate, so a base
   whose velocity must change more along one axis than the other does not go from ``m`` to the
   command in a straight line: both axes change at the same rate until the nearer arrives, then
   the other goes on alone (:func:`axis_path`). Braking a diagonal motion to rest thus first takes
   away the smaller component and then drives along the larger axis, at a return that neither
   ``m`` nor the command points at. With ``axis_brake`` the velocities of that path (at the same
   fractions ``a``, the same tolerance and, with ``sweep_lag``, from the same places) are judged
   beside the straight blend, and a stop is not a zero but a **brake along ``m``**: the planar
   command ``m (1 - decel P / |m|)`` (zero once ``|m| <= decel P``; ``P`` the control period the
   command is held for) and ``wz`` zero, a target on the line of ``m`` that a base limited per axis
   reaches within the period, so the robot slows down along the motion that step 5 found it can
   stop from, not along the axis the limits bend it to. Off (a section without the key):
   revision 2 exactly.

Moving away from an obstacle is never limited, nor is moving along one outside the margin (with
``slide``, inside it too), so the guard cannot trap the robot: it only refuses the directions that
close in on a return. The rule is vectorised over worlds and beams
(no Python loop) and keeps the dtype and device of its inputs.

The guard a policy was trained with travels in its bundle (the contract's optional ``guard``
section, :meth:`GuardRule.to_dict`); the node applies that guard by default. A section without
``unseen_clearance`` is read with :data:`UNSEEN_CLEARANCE`: the robot never drives fast into what
it cannot see, whatever its bundle states.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from navcontract.response import RobotResponse
from navcontract.scan import TRAINING_ANGLE_MIN
from navcontract.xp import ops_for

GUARD_SECTION = "guard"
"""The contract section that carries the guard a policy was trained with."""

ALONG_EPS = 1e-4
"""[m] A return must be at least this far ahead along the motion to block it: one exactly abeam (the
robot sliding along a wall it touches) is not in the way, whatever the float rounding of its angle."""


SLIDE_EPS = 0.01
"""[m] With ``slide``: how much of its gap a return already inside the margin may lose per command."""


UNSEEN_CLEARANCE = 0.1
"""[m] Rule step 0: an unseen beam counts as a return this far beyond ``radius + margin``. It is the
smallest round number at which, with the 72 beams of the shipped bundles and a 270-degree lidar,
motion straight sideways stays clear of the blind sector's returns (its edge beam, at 140 degrees,
lies outside the band the shell sweeps): only motion with a backward component is stopped. A
section without the key is read with this value."""


GUARD_REVISION = 3
"""The revision of the rule this module applies, raised whenever a rule step changes what it lets out
(2: rule step 5 allows each velocity on the way only its share of :data:`MOMENTUM_TOLERANCE`; 3: rule
step 0b caps a turn that would carry a near return out of sight, on by default). Long
evaluations that keep their finished batches in a file (the safety suite, ``nav-compare``) name it in
the file's key, so that a run resumed after a change never mixes two rules in one result."""


MOMENTUM_TOLERANCE = 0.1
"""[m/s] Rule step 5: how much faster than it could stop the measured velocity may be before the
planar command is zeroed (odometry's noise on a robot at rest stays below it). A velocity on the way,
``(1 - a) m + a c``, carries ``1 - a`` of the measurement's noise, so it is allowed ``(1 - a)`` of
this, and the command's own end none: a velocity the base will really pass through is not let off
by noise it does not carry."""
MOMENTUM_ROUNDING = 1e-4
"""[m/s] Rule step 5: float rounding allowed on top (the command's own end, capped by step 4 at ``b``,
may come out a few float32 ulps above it)."""
MOMENTUM_SAMPLES = 9
"""Rule step 5: the velocities checked on the way from the measured one to the command's, both ends included."""


TURN_STEP = 0.1
"""[rad] Rule step 2b: the largest angle between neighbouring directions of the fan a turning
command is checked along (at 1 m from the robot, 10 cm between neighbouring directions)."""


STAGE = "last"
"""Where the guard sits in the command pipeline (clamp, velocity smoother, guard): the contract's
``guard.stage``, the only value this runtime reads."""


DEFAULT_MARGIN = 0.01
"""[m] The margin of :func:`default_guard` (and of the training config's ``env.guard.margin``)."""
DEFAULT_HEADWAY = 0.5
"""[s] The headway of :func:`default_guard` (and of ``env.guard.headway``)."""
DEFAULT_DECEL = 2.5
"""[m/s^2] The braking of :func:`default_guard` without a trained acceleration limit (and ``env.guard.decel``)."""


@dataclass(frozen=True)
class GuardRule:
    """The guard's parameters (see the module docstring for the rule). The values a policy trained
    with come from its training config (``env.guard``) or its contract; ``unseen_clearance``
    defaults to :data:`UNSEEN_CLEARANCE` (a contract section without it)."""

    radius: float  # [m] the robot's shell radius
    margin: float  # [m] kept free beyond the radius
    headway: float  # [s] time headway to the nearest blocking return
    decel: float  # [m/s^2] braking deceleration the cap allows for
    slide: bool  # a return already within the margin may be slid past (rule step 1b)
    unseen_clearance: float = UNSEEN_CLEARANCE  # [m] an unseen beam's return beyond radius + margin (step 0)
    after_smoother: bool = False  # training checked the command smoothed at robot_response.accel_limit
    reaction: float = 0.0  # [s] scan to braking: control period, delays, actuator lag (rule step 3)
    # Rule step 5: zero while the base's velocity, turning to the command, would pass one it cannot stop from.
    momentum: bool = True
    steer: float = 0.0  # [deg] a holonomic command may be turned by up to this (navcontract.steer; 0: off)
    sweep_lag: float = 0.0  # [s] rule step 5: each velocity on the way judged from where this lag takes the robot
    axis_brake: bool = False  # rule step 5b: the per-axis path judged too, a stop brakes along the measured velocity
    keep_sight: bool = True  # rule step 0b: a turn never carries a return nearer than unseen_range out of sight

    NUMBERS: ClassVar[tuple[str, ...]] = ("radius", "margin", "headway", "decel")
    FLAGS: ClassVar[tuple[str, ...]] = ("slide", "after_smoother")
    OPTIONAL: ClassVar[tuple[str, ...]] = (
        *FLAGS,
        "unseen_clearance",
        "stage",
        "reaction",
        "momentum",
        "steer",
        "sweep_lag",
        "axis_brake",
        "keep_sight",
    )

    def __post_init__(self) -> None:
        for name in ("radius", "headway", "decel"):
            v = getattr(self, name)
            if not (isinstance(v, int | float) and math.isfinite(v) and v > 0):
                raise ValueError(f"guard {name} must be finite and > 0, got {v!r}")
        for name in ("margin", "unseen_clearance", "reaction", "sweep_lag"):
            v = getattr(self, name)
            if isinstance(v, bool) or not (isinstance(v, int | float) and math.isfinite(v) and v >= 0):
                raise ValueError(f"guard {name} must be finite and >= 0, got {v!r}")
        for name in (*self.FLAGS, "momentum", "axis_brake", "keep_sight"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"guard {name} must be true or false, got {getattr(self, name)!r}")
        s = self.steer
        if isinstance(s, bool) or not (isinstance(s, int | float) and math.isfinite(s) and 0 <= s <= 90):
            raise ValueError(f"guard steer must be a number of degrees in [0, 90], got {s!r}")

    @property
    def unseen_range(self) -> float:
        """[m] Where rule step 0 puts the return of an unseen beam: ``radius + margin + unseen_clearance``."""
        return float(self.radius + self.margin + self.unseen_clearance)

    @property
    def time_headway(self) -> float:
        """[s] The headway rule step 3 keeps: ``max(headway, e reaction)``."""
        return max(self.headway, math.e * self.reaction)

    def speed_cap(self, free: float) -> float:
        """[m/s] Rule step 3 for one free distance ``free`` [m]: ``min(free / h, b(free))``, 0 when
        ``free <= 0``."""
        d = max(float(free), 0.0)
        return min(d / self.time_headway, braking_speed(d, self.reaction, self.decel))

    def passing_clearance(self, num_beams: int) -> float:
        """[m] The least distance at which the robot drives past a seen return without the guard
        stopping it, on a scan of ``num_beams`` beams: ``c = (radius + margin) / (1 - sin(delta))``,
        ``delta = pi / num_beams`` (half the beam increment).

        Rule steps 1-3: a return at range ``r`` is a disc of radius ``rho(r) = radius + margin + r
        sin(delta)``, and the free distance to it is positive exactly while ``r > rho(r)``, i.e.
        ``r > c``, whatever its bearing. A robot that passes the return at a distance ``l > c``
        keeps ``r >= l > c`` and never gets a free distance of zero; one that passes it closer
        meets it in its band at ``r = c`` and stops there. ``slide`` (step 1b) only shrinks the
        disc, so ``c`` is a bound on what a sliding guard asks too."""
        if isinstance(num_beams, bool) or not (isinstance(num_beams, int) and num_beams >= 3):
            raise ValueError(f"guard passing clearance: num_beams must be a whole number >= 3, got {num_beams!r}")
        return float((self.radius + self.margin) / (1.0 - math.sin(math.pi / num_beams)))

    def to_dict(self) -> dict[str, float | bool | str]:
        out: dict[str, float | bool | str] = {k: float(getattr(self, k)) for k in self.NUMBERS}
        out["slide"] = self.slide
        out["unseen_clearance"] = float(self.unseen_clearance)
        out["stage"] = STAGE
        out["after_smoother"] = self.after_smoother
        out["reaction"] = float(self.reaction)
        out["momentum"] = self.momentum
        out["steer"] = float(self.steer)
        out["sweep_lag"] = float(self.sweep_lag)
        out["axis_brake"] = self.axis_brake
        out["keep_sight"] = self.keep_sight
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], reaction: float = 0.0) -> GuardRule:
        """The contract's ``guard`` section: the four numbers, each required; ``reaction`` (a number
        >= 0; a section without it: the argument ``reaction``, which the contract's reader derives
        from the contract with :func:`reaction_time`); ``slide`` (a boolean; a
        section without it slides nothing); ``unseen_clearance`` (a number >= 0; a section without
        it: :data:`UNSEEN_CLEARANCE`); ``stage`` (``"last"`` when given); ``after_smoother`` (a
        boolean: training ran the velocity smoother before the guard, at the contract's
        ``robot_response.accel_limit``; a section without it: false); ``momentum`` (a boolean, rule
        step 5; a section without it: true, so every robot gets it); ``steer`` (degrees,
        :mod:`navcontract.steer`; a section without it: 0, no steering); ``sweep_lag`` (seconds, rule
        step 5; a section without it: 0, each velocity judged from where the robot is); ``axis_brake``
        (a boolean, rule step 5b; a section without it: false); ``keep_sight`` (a boolean, rule step
        0b; a section without it: true, so every robot gets it). An unknown, missing or mistyped key
        is an error naming it."""
        known = set(cls.NUMBERS) | set(cls.OPTIONAL)
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown guard key(s): {', '.join(unknown)} (known: {', '.join(sorted(known))})")
        for key in cls.NUMBERS:
            if key not in data:
                raise ValueError(f"guard has no {key}")
        for key in (*cls.NUMBERS, "unseen_clearance", "reaction", "steer", "sweep_lag"):
            value = data.get(key, 0.0)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"guard.{key} must be a number, got {value!r}")
        flags = {name: data.get(name, False) for name in cls.FLAGS}
        for name, value in flags.items():
            if not isinstance(value, bool):
                raise ValueError(f"guard.{name} must be true or false, got {value!r}")
        stage = data.get("stage", STAGE)
        if stage != STAGE:
            raise ValueError(f"guard.stage must be {STAGE!r} (clamp, velocity smoother, then the guard), got {stage!r}")
        clearance = float(data.get("unseen_clearance", UNSEEN_CLEARANCE))
        react = float(data.get("reaction", reaction))
        momentum = data.get("momentum", True)
        if not isinstance(momentum, bool):
            raise ValueError(f"guard.momentum must be true or false, got {momentum!r}")
        numbers = {k: float(data[k]) for k in cls.NUMBERS}
        steer, lag = float(data.get("steer", 0.0)), float(data.get("sweep_lag", 0.0))
        axis_brake = data.get("axis_brake", False)
        if not isinstance(axis_brake, bool):
            raise ValueError(f"guard.axis_brake must be true or false, got {axis_brake!r}")
        keep_sight = data.get("keep_sight", True)
        if not isinstance(keep_sight, bool):
            raise ValueError(f"guard.keep_sight must be true or false, got {keep_sight!r}")
        return cls(
            **numbers,
            **flags,
            unseen_clearance=clearance,
            reaction=react,
            momentum=momentum,
            steer=steer,
            sweep_lag=lag,
            axis_brake=axis_brake,
            keep_sight=keep_sight,
        )


def reaction_time(control_period: float, latency_budget: float, actuator_tau: float | None) -> float:
    """[s] The guard's reaction time (rule step 3): the control period (a command is held until the
    next one), the largest delay of scan and command (the contract's ``robot_response
    .latency_budget``) and the actuator's largest time constant (``actuator_tau``'s high end; None:
    no lag was trained). The same sum in training (from the randomisation) and on the robot (from the
    contract)."""
    return float(control_period) + float(latency_budget) + (0.0 if actuator_tau is None else float(actuator_tau))


def response_reaction(control_period: float, response: RobotResponse | None) -> float:
    """[s] :func:`reaction_time` of a base that answers as ``response`` describes (None: a contract
    without the section, no trained delay or lag)."""
    if response is None:
        return reaction_time(control_period, 0.0, None)
    tau = None if response.actuator_tau is None else response.actuator_tau[1]
    return reaction_time(control_period, response.latency_budget, tau)


def braking_speed(free: Any, reaction: float, decel: float) -> Any:
    """[m/s] The speed ``v`` with ``v T + v^2 / (2 decel) = free`` (``T = reaction``, ``free >= 0``):
    ``2 free / (T + sqrt(T^2 + 2 free / decel))``, the form without cancellation; ``sqrt(2 decel
    free)`` for ``T = 0``. Works on floats and on numpy and torch arrays alike."""
    sqrt = math.sqrt if isinstance(free, int | float) else ops_for(free).sqrt
    if reaction == 0.0:
        return sqrt(2.0 * decel * free)
    return 2.0 * free / (reaction + sqrt(reaction * reaction + 2.0 * free / decel))


def states_unseen_clearance(section: Mapping[str, Any] | None) -> bool:
    """Whether a contract's ``guard`` section states ``unseen_clearance`` (else it is read with the default)."""
    return section is not None and "unseen_clearance" in section


def guarded_ranges(ranges: Any, seen: Any, rule: GuardRule) -> Any:
    """Rule step 0: ``ranges`` with every unseen beam (``seen`` false) lowered to at most
    :attr:`GuardRule.unseen_range`; ``seen`` None: every beam was seen (the ranges as they are)."""
    if seen is None:
        return ranges
    xp = ops_for(ranges)
    return xp.where(seen, ranges, xp.minimum(ranges, rule.unseen_range))


UNLIMITED_TURN = 1e6
"""[rad/s] Rule step 0b's cap on a side no near return limits (more than any base turns)."""


def sight_turn_caps(ranges: Any, seen: Any, rule: GuardRule) -> tuple[Any, Any]:
    """Rule step 0b: ``(most wz > 0, most |wz| for wz < 0)``, each ``(...,)`` [rad/s], for ``ranges``
    ``(..., num_beams)`` on the training layout and ``seen`` (the beams the scan saw): a seen return
    nearer than :attr:`GuardRule.unseen_range` may turn ``2 delta`` per seen sector between it and
    the nearest unseen one on the side the turn moves it toward (counter-clockwise turns move returns
    toward lower beam indices), at most that angle over the time headway; :data:`UNLIMITED_TURN`
    where nothing limits it."""
    xp = ops_for(ranges)
    ranges = xp.as_float(ranges)
    if not hasattr(seen, "shape"):
        seen = np.asarray(seen, dtype=bool)
    num = ranges.shape[-1]
    near = seen & (ranges < rule.unseen_range)
    step = (2.0 * math.pi / num) / rule.time_headway
    ccw = _seen_before_unseen(xp, ~seen, ranges)
    cw = xp.flip(_seen_before_unseen(xp, xp.flip(~seen), ranges), -1)
    out = []
    for gap in (ccw, cw):
        cap = xp.amin(xp.where(near, gap * step, UNLIMITED_TURN), axis=-1)
        out.append(xp.minimum(cap, UNLIMITED_TURN))
    return out[0], out[1]


def _seen_before_unseen(xp: Any, unseen: Any, like: Any) -> Any:
    """``(..., num_beams)`` float: per beam, how many beams lie between it and the nearest unseen beam
    at a lower index, cyclically (the beam itself not counted; about 1e9 when none is unseen)."""
    num = unseen.shape[-1]
    index = xp.as_float(xp.arange(2 * num, like))
    twice = xp.concat([unseen, unseen], axis=-1)
    last = xp.cummax(xp.where(twice, index, -1e9), axis=-1)  # the last unseen beam at or before each
    return index[num:] - last[..., num - 1 : 2 * num - 1] - 1.0


def fan_size(speed: float, omega: float, rule: GuardRule) -> int:
    """The most angles beyond the first a command of planar speed at most ``speed`` and yaw rate at
    most ``omega`` (the base's limits) can need (rule step 2b): ``ceil(|end| / TURN_STEP)``."""
    return math.ceil(abs(0.5 * omega * (rule.reaction + speed / rule.decel)) / TURN_STEP)


def turn_fan(command: Any, rule: GuardRule, most: int | None = None) -> list[Any]:
    """Rule step 2b: the angles ``(...,)`` [rad] the command's direction is turned by, one array per
    direction of the fan, the first None (the command's own direction, turned by 0). Each world's
    fan is its own: ``k = 1 + ceil(|end| / TURN_STEP)`` evenly spaced angles from 0 to ``end = wz
    (reaction + s / decel) / 2``; a batch holds as many arrays as its widest fan needs, a world with
    fewer angles repeating its last, so a world's guard is the same alone as in any batch. ``most``
    (at least any world's count, :func:`fan_size` of the base's limits) fixes the number of arrays
    instead of reading the widest fan from the batch: no host sync on a GPU, the same result."""
    xp = ops_for(command)
    command = xp.as_float(command)
    vx, vy, wz = command[..., 0], command[..., 1], command[..., 2]
    speed = xp.sqrt(vx * vx + vy * vy)
    end = 0.5 * wz * (rule.reaction + speed / rule.decel)
    width = xp.maximum(end, -end)
    steps = -((-width / TURN_STEP) // 1.0)  # ceil(|end| / TURN_STEP): the world's fan has steps + 1 angles
    if most is None:
        flat = steps.reshape(-1)
        most = int(float(xp.amax(flat, axis=-1))) if flat.shape[0] else 0
    safe = xp.maximum(steps, 1.0)
    return [None, *(end * xp.minimum(i / safe, 1.0) for i in range(1, most + 1))]


_BEAM_DIRECTIONS: dict[tuple[str, str, int], tuple[Any, Any]] = {}


def beam_directions(xp: Any, num_beams: int, like: Any) -> tuple[Any, Any]:
    """``(cos, sin)`` of the training beams' angles ``(num_beams,)``, float32 in ``like``'s array kind
    and device; computed once per kind, device and beam count (every guard call reads them)."""
    key = (xp.name, str(getattr(like, "device", "cpu")), num_beams)
    found = _BEAM_DIRECTIONS.get(key)
    if found is None:
        theta = xp.as_float(xp.arange(num_beams, like)) * (2.0 * math.pi / num_beams) + TRAINING_ANGLE_MIN
        found = (xp.cos(theta), xp.sin(theta))
        for part in found:
            if isinstance(part, np.ndarray):
                part.setflags(write=False)  # shared by every call: never written
        _BEAM_DIRECTIONS[key] = found
    return found


def free_distances(
    ranges: Any,
    command: Any,
    rule: GuardRule,
    max_range: float,
    seen: Any = None,
    turn: Any = None,
    offset: Any = None,
) -> tuple[Any, Any]:
    """Rule steps 0-2 per beam: ``(free, blocks)``, both ``(..., num_beams)``: the free distance
    ``d_j`` the planar command's direction (turned by ``turn`` [rad], ``(...,)`` or with a fan axis
    ``(..., k)`` against ``ranges`` ``(..., 1, num_beams)``, rule step 2b; None: as it is) leaves to
    beam ``j``, and whether that beam blocks the motion at all (ahead, in the swept band, a return). Arguments as :func:`guard_scale`; a command without planar speed sweeps
    along +x (its result is not used: such a command is never scaled)."""
    xp = ops_for(ranges)
    ranges = xp.as_float(ranges)
    command = xp.as_float(command)
    num_beams = ranges.shape[-1]
    increment = 2.0 * math.pi / num_beams
    cos_theta, sin_theta = beam_directions(xp, num_beams, ranges)
    hit = ranges < max_range
    if seen is not None:
        ranges = guarded_ranges(ranges, seen, rule)
        hit = hit | ~seen
    vx, vy = command[..., 0], command[..., 1]
    speed = xp.sqrt(vx * vx + vy * vy)
    safe_speed = xp.where(speed > 1e-6, speed, 1.0)
    ux, uy = vx / safe_speed, vy / safe_speed
    if turn is not None:
        c, sn = xp.cos(turn), xp.sin(turn)
        ux, uy = ux * c - uy * sn, ux * sn + uy * c
    ux, uy = ux[..., None], uy[..., None]
    px, py = ranges * cos_theta, ranges * sin_theta
    gap = ranges  # [m] from the robot's centre to each return
    if offset is not None:  # judged from a displaced robot: each return as seen from there
        px, py = px - offset[..., 0:1], py - offset[..., 1:2]
        gap = xp.sqrt(px * px + py * py)
    along = px * ux + py * uy
    lateral = px * uy - py * ux
    spread = ranges * math.sin(0.5 * increment)
    rho = rule.radius + rule.margin + spread
    if rule.slide:
        # Rule step 1b: a return inside its disc keeps what is left of the gap less SLIDE_EPS, never
        # less than the shell plus the spread: the robot may slide past it and close in only slowly.
        rho = xp.minimum(rho, xp.maximum(gap - SLIDE_EPS, rule.radius + spread))
    band = rho * rho - lateral * lateral
    blocks = (along > ALONG_EPS) & (band > 0.0) & hit
    free = along - xp.sqrt(xp.maximum(band, 0.0))
    return free, blocks


FAN_AT_ONCE_MAX = 16
"""A numpy batch of more commands than this checks its fan one direction at a time (same result)."""


CHUNK_ELEMENTS = 1 << 17
"""A torch batch on the CPU whose per-beam arrays would hold more elements than this is judged in
slices of its first axis that hold about this many (the same result: every world is judged on its
own), so that each slice's arrays stay in the cache instead of streaming through memory."""


def in_slices(xp: Any, fn: Callable[..., Any], arrays: list[Any], shape: tuple[int, ...]) -> Any:
    """``fn(*arrays)``: in one piece, or for a torch batch on the CPU whose per-beam arrays (of the
    broadcast ``shape``, worlds first) would hold more than :data:`CHUNK_ELEMENTS`, over slices of the
    worlds, concatenated along the first axis. Each array's first axis is the worlds' (or 1: passed
    whole to every slice); None passes through. The same result when ``fn`` judges each world on its own."""
    rows = shape[0] if len(shape) > 1 else 1
    step = max(1, CHUNK_ELEMENTS // max(math.prod(shape) // max(rows, 1), 1))
    if xp.name != "torch" or rows <= step or any(a is not None and a.is_cuda for a in arrays):
        return fn(*arrays)

    def part(x: Any, i: int) -> Any:
        return x if x is None or x.shape[0] == 1 else x[i : i + step]

    return xp.concat([fn(*(part(a, i) for a in arrays)) for i in range(0, rows, step)], axis=0)


def _worlds_shape(xp: Any, probes: list[Any]) -> tuple[int, ...] | None:
    """The broadcast shape of torch arrays as they meet the beams (None entries skipped), when the
    first axis of every one is the worlds' (all of the same rank); else None (not to be sliced)."""
    present = [p for p in probes if p is not None]
    shape = tuple(xp.t.broadcast_shapes(*(p.shape for p in present)))
    return shape if all(p.dim() == len(shape) for p in present) else None


def _least_free(
    xp: Any, ranges: Any, command: Any, rule: GuardRule, max_range: float, seen: Any, turn: Any, offset: Any = None
) -> Any:
    """The least free distance over the beams that block the command's direction turned by ``turn``
    (rule steps 0-2b; from the robot displaced by ``offset``, when given); -1 when an unseen beam
    blocks it (rule step 0), 1e6 when none does."""

    def least(r: Any, c: Any, sn: Any, t: Any, o: Any) -> Any:
        return _least_free_all(xp, r, c, rule, max_range, sn, t, o)

    arrays = [ranges, command, seen, turn, offset]
    if xp.name == "torch":
        turned = None if turn is None else turn[..., None]
        shape = _worlds_shape(
            xp, [ranges, command[..., 0:1], seen, turned, None if offset is None else offset[..., 0:1]]
        )
        if shape is not None:
            return in_slices(xp, least, arrays, shape)
    return least(*arrays)


def _least_free_all(
    xp: Any, ranges: Any, command: Any, rule: GuardRule, max_range: float, seen: Any, turn: Any, offset: Any = None
) -> Any:
    """:func:`_least_free` in one piece."""
    free, blocks = free_distances(ranges, command, rule, max_range, seen, turn, offset)
    least = xp.amin(xp.where(blocks, free, 1e6), axis=-1)
    if seen is not None:  # rule step 0: an unseen return in the band stops the motion
        least = xp.where(xp.any(blocks & ~seen, axis=-1), -1.0, least)
    return least


def _fan_least_on_cpu(
    xp: Any, ranges: Any, command: Any, rule: GuardRule, max_range: float, seen: Any, angles: Any
) -> Any:
    """A torch batch's least free distance over its fans (``angles`` ``(..., k)``, each world's last
    angle repeated to the batch's width: :func:`turn_fan`) on the CPU, in slices of worlds
    (:func:`in_slices`); each slice drops the fan columns that repeat its last one in every world of
    the slice (they give the last one's distance again), so a slice of slow turns judges few angles."""
    shape = _worlds_shape(xp, [ranges, command[..., 0:1], seen, angles[..., None]])

    def least(r: Any, c: Any, sn: Any, t: Any) -> Any:
        width = t.shape[-1]
        repeats = (t == t[..., -1:]).reshape(-1, width).all(dim=0)
        repeats[-1] = False
        if bool(repeats.any()):
            t = t[..., ~repeats]
        return xp.amin(_least_free_all(xp, r, c, rule, max_range, sn, t), axis=-1)

    arrays = [ranges, command, seen, angles]
    return least(*arrays) if shape is None else in_slices(xp, least, arrays, shape)


def guard_scale(
    ranges: Any, command: Any, rule: GuardRule, max_range: float, seen: Any = None, fan: int | None = None
) -> Any:
    """Per-world factor in [0, 1] for the planar command.

    ``ranges``: ``(..., num_beams)`` metres on the training beam layout; ``command``: ``(..., 3)``
    body-frame ``[vx, vy, wz]`` in m/s and rad/s; ``seen``: ``(..., num_beams)`` bool, the beams
    the scan saw (rule step 0; None: all of them). Returns ``(...,)``.
    """
    xp = ops_for(ranges)
    ranges, command = xp.as_float(ranges), xp.as_float(command)
    if seen is not None and not hasattr(seen, "shape"):
        seen = np.asarray(seen, dtype=bool)
    turns = turn_fan(command, rule, fan)
    if xp.name == "numpy" and command[..., 0].size > FAN_AT_ONCE_MAX:
        # A large numpy batch (the DWA's samples): one direction at a time stays in the cache.
        dist = None
        for turn in turns:
            least = _least_free(xp, ranges, command, rule, max_range, seen, turn)
            dist = least if dist is None else xp.minimum(dist, least)
    else:
        # Every direction of the fan at once, a fan axis before the beams: (..., k, num_beams).
        angles = xp.stack([command[..., 2] * 0.0 if t is None else t for t in turns], axis=-1)
        seen_k = None if seen is None else seen[..., None, :]
        if xp.name == "torch" and not angles.is_cuda:
            dist = _fan_least_on_cpu(xp, ranges[..., None, :], command[..., None, :], rule, max_range, seen_k, angles)
        else:
            least = _least_free(xp, ranges[..., None, :], command[..., None, :], rule, max_range, seen_k, angles)
            dist = xp.amin(least, axis=-1)
    vx, vy = command[..., 0], command[..., 1]
    speed = xp.sqrt(vx * vx + vy * vy)
    moving = speed > 1e-6
    safe_speed = xp.where(moving, speed, 1.0)
    positive = xp.maximum(dist, 0.0)
    cap = xp.minimum(positive / rule.time_headway, braking_speed(positive, rule.reaction, rule.decel))
    scale = xp.minimum(cap / safe_speed, 1.0)
    return xp.where(moving, scale, 1.0)


def blocking_beam(ranges: Any, command: Any, rule: GuardRule, max_range: float, seen: Any = None) -> int | None:
    """One robot (``ranges`` ``(num_beams,)``, ``command`` ``(3,)``): the beam whose return limits the
    planar command (the least free distance of rule steps 2 and 2b), or None when nothing blocks it or it has
    no planar speed."""
    command = np.asarray(command, dtype=np.float64).reshape(-1)
    if math.hypot(float(command[0]), float(command[1])) <= 1e-6:
        return None
    ranges = np.asarray(ranges, dtype=np.float64)
    best: tuple[float, int] | None = None
    for turn in turn_fan(command, rule):
        free, blocks = free_distances(ranges, command, rule, max_range, seen, turn)
        if np.any(blocks):
            j = int(np.argmin(np.where(blocks, free, np.inf)))
            if best is None or free[j] < best[0]:
                best = (float(free[j]), j)
    return None if best is None else best[1]


def momentum_stop(ranges: Any, motion: Any, command: Any, rule: GuardRule, max_range: float, seen: Any = None) -> Any:
    """Rule step 5 per world: whether the base, going from the measured body twist ``motion``
    ``(..., 3)`` to the planar part of ``command`` ``(..., 3)`` (already scaled by steps 1-4), passes
    through a velocity it cannot stop from before a return in its direction while it can still stop
    from the one it has: of :data:`MOMENTUM_SAMPLES` velocities ``v = (1 - a) m + a c`` (``a`` from
    0 to 1), one with ``a > 0`` is faster than ``b(D_v) + (1 - a)`` :data:`MOMENTUM_TOLERANCE` (``D_v``
    the free distance along it, steps 0-2; the tolerance is for the noise of ``m``) and ``m`` itself is
    not. With ``rule.sweep_lag`` > 0 each ``D_v`` is also measured from where the robot will be when
    its velocity gets there (:func:`sweep_travel`), and the nearer counts. Other arguments as
    :func:`guard_scale`."""
    xp = ops_for(ranges)
    ranges, motion, command = xp.as_float(ranges), xp.as_float(motion), xp.as_float(command)
    if seen is not None and not hasattr(seen, "shape"):
        seen = np.asarray(seen, dtype=bool)
    a = xp.constant([k / (MOMENTUM_SAMPLES - 1) for k in range(MOMENTUM_SAMPLES)], ranges)  # (K,), exact in float32
    vx = (1.0 - a) * motion[..., 0:1] + a * command[..., 0:1]  # (..., K)
    vy = (1.0 - a) * motion[..., 1:2] + a * command[..., 1:2]
    blend = xp.stack([vx, vy, vx * 0.0], axis=-1)  # (..., K, 3)
    offset = sweep_travel(xp, motion, command, rule.sweep_lag, ranges) if rule.sweep_lag > 0.0 else None
    over = _over_on_the_way(xp, ranges, blend, a, rule, max_range, seen, offset)
    if rule.axis_brake:  # rule step 5b: the path of a base limited per axis too
        over = over | _over_on_the_way(xp, ranges, axis_path(xp, motion, command, a), a, rule, max_range, seen, offset)
    return xp.any(over[..., 1:], axis=-1) & ~over[..., 0]


def _over_on_the_way(
    xp: Any, ranges: Any, velocities: Any, a: Any, rule: GuardRule, max_range: float, seen: Any, offset: Any
) -> Any:
    """Rule step 5 per velocity ``(..., K, 3)`` on the way (fractions ``a``, ``(K,)``): ``(..., K)``
    whether it is faster than the robot could stop from before the return along it (with
    ``offset``, also from where the robot will be, the nearer counting), less its share of the
    tolerance."""
    seen_k = None if seen is None else seen[..., None, :]
    least = _least_free(xp, ranges[..., None, :], velocities, rule, max_range, seen_k, None)  # (..., K)
    if offset is not None:  # and from where the robot will be: the nearer of the two
        least = xp.minimum(
            least, _least_free(xp, ranges[..., None, :], velocities, rule, max_range, seen_k, None, offset)
        )
    speed = xp.sqrt(velocities[..., 0] * velocities[..., 0] + velocities[..., 1] * velocities[..., 1])
    allowed = braking_speed(xp.maximum(least, 0.0), rule.reaction, rule.decel) + MOMENTUM_TOLERANCE * (1.0 - a)
    return speed > allowed + MOMENTUM_ROUNDING


def axis_path(xp: Any, motion: Any, command: Any, a: Any) -> Any:
    """Rule step 5b: ``(..., K, 3)`` the planar velocities a base that limits ``vx`` and ``vy`` each by
    the same acceleration passes on its way from ``motion`` ``m`` to ``command`` ``c`` (``(..., 3)``),
    at the fractions ``a`` ``(K,)`` of the way: ``m + clip(c - m, -s, s)`` per axis with ``s = a
    max(|c_x - m_x|, |c_y - m_y|)`` (both axes change at one rate; the one with less to change
    arrives first); ``wz`` 0. Its ends are ``m`` and ``c``, as the straight blend's."""
    dx = command[..., 0:1] - motion[..., 0:1]  # (..., 1)
    dy = command[..., 1:2] - motion[..., 1:2]
    reach = xp.maximum(xp.maximum(dx, -dx), xp.maximum(dy, -dy))
    s = a * reach  # (..., K)
    vx = motion[..., 0:1] + xp.maximum(xp.minimum(dx, s), -s)
    vy = motion[..., 1:2] + xp.maximum(xp.minimum(dy, s), -s)
    return xp.stack([vx, vy, vx * 0.0], axis=-1)


def brake_command(xp: Any, motion: Any, decel: float, period: float) -> Any:
    """Rule step 5b's stop: ``(..., 3)`` the measured body twist ``motion``'s planar velocity slowed by
    ``decel`` over one control ``period`` along its own line (zero once its speed is at most ``decel
    period``), ``wz`` zero: a target that a base limited per axis reaches along that line."""
    mx, my = motion[..., 0], motion[..., 1]
    speed = xp.sqrt(mx * mx + my * my)
    keep = xp.maximum(speed - decel * period, 0.0) / xp.where(speed > 1e-9, speed, 1.0)
    return xp.stack([mx * keep, my * keep, mx * 0.0], axis=-1)


def sweep_travel(xp: Any, motion: Any, command: Any, lag: float, like: Any) -> Any:
    """Rule step 5 with ``sweep_lag``: ``(..., K, 2)`` where the robot is [m, body frame] when a base
    following the command with a first-order lag of ``lag`` seconds has its velocity at each of the
    :data:`MOMENTUM_SAMPLES` blends ``v = (1 - a) m + a c``: ``m t + (c - m)(t - lag a) = lag a m + (t -
    lag a) c`` at ``t = -lag ln(1 - a)``; the command's own end (``a = 1``, never reached) at the robot's
    place, as steps 1-4 judge it."""
    a = [k / (MOMENTUM_SAMPLES - 1) for k in range(MOMENTUM_SAMPLES - 1)]
    m_coef = xp.constant([lag * x for x in a] + [0.0], like)  # (K,)
    c_coef = xp.constant([-lag * math.log(1.0 - x) - lag * x for x in a] + [0.0], like)
    ox = m_coef * motion[..., 0:1] + c_coef * command[..., 0:1]  # (..., K)
    oy = m_coef * motion[..., 1:2] + c_coef * command[..., 1:2]
    return xp.stack([ox, oy], axis=-1)


def apply_guard(
    ranges: Any,
    command: Any,
    rule: GuardRule,
    max_range: float,
    seen: Any = None,
    fan: int | None = None,
    motion: Any = None,
    period: float | None = None,
) -> tuple[Any, Any]:
    """``(guarded command, scale)``: the planar part of ``command`` scaled by :func:`guard_scale`
    (``seen``: the beams the scan saw, rule step 0; None: all of them; ``fan``: see :func:`turn_fan`),
    and zeroed where the measured body twist ``motion`` ``(..., 3)`` trips rule step 5 (with
    ``rule.momentum``; None: no measurement, step 5 skipped); with ``rule.axis_brake`` such a stop
    is :func:`brake_command` over the control ``period`` [s] (required then) instead, its scale 0.
    First, with ``rule.keep_sight`` and ``seen``, ``wz`` is capped by rule step 0b
    (:func:`sight_turn_caps`); the capped command is the one judged."""
    xp = ops_for(command)
    if rule.keep_sight and seen is not None:
        command = sight_turned(ranges, command, rule, seen)
    scale = guard_scale(ranges, command, rule, max_range, seen, fan)
    stop = None
    if rule.momentum and motion is not None:
        planar = xp.stack([command[..., 0] * scale, command[..., 1] * scale, command[..., 2]], axis=-1)
        stop = momentum_stop(ranges, motion, planar, rule, max_range, seen)
        scale = xp.where(stop, scale * 0.0, scale)
    # In the command's own precision: wz and an unslowed command pass through unchanged.
    out = xp.stack([command[..., 0] * scale, command[..., 1] * scale, command[..., 2]], axis=-1)
    if stop is not None and rule.axis_brake:
        if period is None or not period > 0.0:
            raise ValueError(f"guard axis_brake needs the control period the command is held for, got {period!r}")
        measured = motion if hasattr(motion, "shape") else np.asarray(motion, dtype=np.float64)
        brake = brake_command(xp, measured, rule.decel, period)
        out = xp.where(stop[..., None], brake, out)
    return out, scale


def sight_turned(ranges: Any, command: Any, rule: GuardRule, seen: Any) -> Any:
    """``command`` ``(..., 3)`` with ``wz`` capped by rule step 0b (:func:`sight_turn_caps` of
    ``ranges`` and ``seen``, which broadcast against the command's batch: one scan for many
    commands), in the command's own precision: a command no near return limits comes back with the
    same numbers."""
    if not hasattr(command, "shape"):
        command = np.asarray(command, dtype=np.float64)
    if isinstance(seen, np.ndarray) and seen.all():
        return command  # nothing unseen: no cap (a numpy scan only; a torch one is not read back)
    xp = ops_for(command)
    up, down = sight_turn_caps(ranges, seen, rule)
    wz = command[..., 2]
    held = xp.minimum(xp.maximum(wz, -down), up)
    return xp.stack([command[..., 0], command[..., 1], held], axis=-1)


def default_guard(radius: float, reaction: float, accel_limit: float | None = None) -> GuardRule:
    """The guard a node applies to a policy trained without one (a contract without a ``guard``
    section): the robot's ``radius``, :data:`DEFAULT_MARGIN` with ``slide``, :data:`DEFAULT_HEADWAY`,
    braking at the most restrictive trained acceleration limit ``accel_limit`` (None: not trained,
    :data:`DEFAULT_DECEL`), the contract's ``reaction`` time and :data:`UNSEEN_CLEARANCE`: what the
    training config's ``env.guard`` gives by default. Nothing the node sends goes unchecked."""
    decel = DEFAULT_DECEL if accel_limit is None else min(DEFAULT_DECEL, float(accel_limit))
    return GuardRule(
        radius=float(radius),
        margin=DEFAULT_MARGIN,
        headway=DEFAULT_HEADWAY,
        decel=decel,
        slide=True,
        reaction=float(reaction),
    )
