"""The deployment bundle: ``policy.onnx`` plus ``contract.json``; reading it needs numpy and onnxruntime.

The ONNX graph takes the raw policy observation ``obs`` (batch, obs_dim) float32 and returns the
raw deterministic mean ``action`` (batch, action dim) float32, *before* clipping and scaling (3 for
a holonomic base, 2 for a differential drive: ``action.order``); the training
observation normaliser is inside the graph: ``(obs - mean) / (std + eps)`` with the checkpoint's
buffers, then the MLP. The contract (JSON) travels twice: in the ONNX metadata under
:data:`METADATA_KEY`, and as ``contract.json`` beside the model for people to read. They must
agree; :func:`read_contract` checks it. Writing lives on the training side (``navtrain.onnx_graph``,
which needs the ``onnx`` package); the metadata is read here through onnxruntime.

Format versions: 2 carries the ``robot_response`` section (:mod:`navcontract.response`: the
acceleration limits, latency budget and actuator time constants the policy was trained with); 1 has
no such section (``Contract.response`` is then None: no acceleration limit unless the node sets
one). Both are read. The ``robot_response`` section, like the limits and the period, is protected
by the two copies of the contract having to agree and by its own consistency checks, not by the
fingerprint.

The robot base (``base``, :class:`navcontract.base.BaseSpec`: the preset's name, drive, footprint
radius, speed, yaw-rate and acceleration limits) is optional in either format. The fingerprint rule
(:func:`contract_fingerprint`): without a ``base`` section the fingerprint is the observation spec's
(:meth:`navcontract.spec.PolicySpec.fingerprint`, what the policy reads); with one it is a hash of
the spec's fingerprint and the whole section, so editing any value of the base fails the load. A
contract without the section stands for the holonomic disc its ``action`` section and
``robot.radius`` describe (``Contract.base``, named ``holonomic_disc`` when it is that preset, else
``unnamed``; its accelerations are the preset's); without ``robot.radius`` either, the footprint is
unknown and ``Contract.base`` is None. With the section: ``base.radius`` is ``robot.radius`` (and the
guard's radius), the base's drive is the action's, and the action's limits are the base's
(``v_max`` its forward limit, ``omega_max``, a diff drive's ``v_backward``; a holonomic base has one
speed limit: its forward, backward and lateral limits are equal).

Two more sections are optional in either format and outside the fingerprint; readers ignore keys
they do not know, so adding them needs no new format:

- ``path_following`` (:class:`navcontract.subgoal.TrainedPathFollowing`: the lookahead, search
  window and share of path-following episodes the policy was trained with). Without it
  ``Contract.path_following`` is None and the robot follows paths with
  :class:`navcontract.subgoal.LookaheadRule`'s defaults. When present it is checked (finite numbers,
  lookahead >= 0, search window > 0, share in [0, 1]).
- ``guard`` (:class:`navcontract.guard.GuardRule`: the collision guard the policy was trained
  driving through). Without it (``Contract.guard`` None: trained without the guard) the node
  applies :func:`navcontract.guard.default_guard` on the contract's radius. When present it must state all four numbers (finite; radius, headway and decel
  > 0, margin >= 0; no other key) and its radius must be the contract's ``robot.radius``. A section
  without ``reaction`` is read with the reaction time the contract implies
  (:func:`navcontract.guard.reaction_time` of its control period and ``robot_response``).
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from navcontract.action import ActionScaling
from navcontract.base import DEFAULT_BASE, HOLONOMIC, BaseError, BaseSpec, load_base
from navcontract.base import SECTION as BASE_SECTION
from navcontract.guard import GUARD_SECTION, GuardRule, response_reaction
from navcontract.response import SECTION as RESPONSE_SECTION
from navcontract.response import ResponseError, RobotResponse
from navcontract.scan import BeamLayout
from navcontract.spec import PolicySpec, spec_from_dict
from navcontract.subgoal import SECTION as PATH_SECTION
from navcontract.subgoal import PathFollowingError, TrainedPathFollowing

FORMAT = "nav_policy.bundle"
FORMAT_VERSION = 2
"""What :func:`make_contract` writes when it is given a ``robot_response``."""
LEGACY_FORMAT_VERSION = 1
"""Contracts without the ``robot_response`` section (read as well)."""
METADATA_KEY = "nav_policy_contract"
FINGERPRINT_KEY = "nav_policy_fingerprint"
ONNX_FILE = "policy.onnx"
CONTRACT_FILE = "contract.json"
INPUT_NAME = "obs"
OUTPUT_NAME = "action"
OPSET = 17
IR_VERSION = 8

ACTIVATIONS = {
    "elu": ("Elu", {"alpha": 1.0}),
    "selu": ("Selu", {}),
    "relu": ("Relu", {}),
    "crelu": ("Celu", {"alpha": 1.0}),
    "lrelu": ("LeakyRelu", {"alpha": 0.01}),
    "tanh": ("Tanh", {}),
    "sigmoid": ("Sigmoid", {}),
    "softplus": ("Softplus", {}),
    "identity": ("Identity", {}),
}
"""rsl_rl activation names -> ONNX operators with torch's default parameters."""


class BundleError(ValueError):
    """A bundle is missing, unreadable, or its two copies of the contract disagree."""


@dataclass(frozen=True)
class Contract:
    """The parsed contract: everything the robot side needs besides the network weights."""

    spec: PolicySpec
    fingerprint: str
    obs_dim: int
    term_names: tuple[str, ...]
    num_beams: int
    max_range: float
    beams: BeamLayout
    v_max: float
    omega_max: float
    scaling: ActionScaling
    action_order: tuple[str, ...]
    control_period: float
    goal_tolerance: float
    robot_radius: float | None
    """Radius of the robot's cylinder shell in training [m]; None when the contract has no ``robot``
    section."""
    raw: dict[str, Any] = field(repr=False, compare=False)
    trained_fov: float = 2.0 * math.pi
    """Field of view [rad] the policy was trained with (``lidar.trained_fov``): a scan covering less
    than the node's ``min_coverage`` share of it is refused. A contract without it stands for 360
    degrees."""
    response: RobotResponse | None = None
    """How the base responded in training (``robot_response``, format 2); None in format 1 bundles."""
    path_following: TrainedPathFollowing | None = None
    """The path-following rule the policy was trained with (``path_following``); None without the
    section (the robot then uses ``LookaheadRule()``)."""
    guard: GuardRule | None = None
    """The collision guard the policy was trained with (``guard``); None without the section
    (trained without the guard: the node then applies the default guard)."""
    base: BaseSpec | None = None
    """The robot base the policy drives (``base``); without the section the holonomic disc of the
    action section and ``robot.radius`` (see the module docstring); None when neither states a
    footprint radius."""

    @property
    def spec_fingerprint(self) -> str:
        """The observation spec's fingerprint (what the policy reads): ``fingerprint`` without a
        ``base`` section; a runtime compares its own spec's fingerprint with this."""
        return self.spec.fingerprint()

    # The beam layout's angles, for planners and logs: always the training layout's (checked on load).
    @property
    def angle_min(self) -> float:
        return self.beams.angle_min

    @property
    def angle_increment(self) -> float:
        return self.beams.angle_increment

    @property
    def fov(self) -> float:
        return self.beams.fov


def make_contract(
    spec: PolicySpec,
    scaling: ActionScaling,
    control_period: float,
    goal_tolerance: float,
    normalizer_eps: float,
    extra: dict[str, Any] | None = None,
    robot_radius: float | None = None,
    trained_fov: float = 2.0 * math.pi,
    sim_lidar: dict[str, Any] | None = None,
    response: RobotResponse | None = None,
    path_following: TrainedPathFollowing | None = None,
    guard: GuardRule | None = None,
    base: BaseSpec | None = None,
) -> dict[str, Any]:
    """The contract as plain JSON data, one section per builder below.

    ``robot_radius``: the training shell radius, if known; ``trained_fov``: the lidar field of view
    [rad] the policy was trained with, which a robot scan must cover; ``sim_lidar``: how the
    simulator rendered the scan, for the record; ``response``: the ``robot_response`` section (with
    it the contract is format 2, without it format 1); ``path_following``: the optional
    ``path_following`` section; ``guard``: the optional ``guard`` section, None when the policy was
    trained without the guard; ``base``: the ``base`` section (the fingerprint then covers it, and
    ``robot_radius`` defaults to its radius); ``extra``: further top-level keys (the training side's
    ``source``).
    """
    d = spec.dims
    if (scaling.v_max, scaling.omega_max) != (d.v_max, d.omega_max):
        raise BundleError(
            f"action scaling (v_max {scaling.v_max}, omega_max {scaling.omega_max}) differs from the "
            f"observation dims (v_max {d.v_max}, omega_max {d.omega_max})"
        )
    contract = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION if response is not None else LEGACY_FORMAT_VERSION,
        "fingerprint": contract_fingerprint(spec, base),
        "observation": observation_section(spec),
        "lidar": lidar_section(spec, trained_fov, sim_lidar),
        "v_max": d.v_max,
        "omega_max": d.omega_max,
        "action": action_section(scaling),
        "control_period": float(control_period),
        "goal_tolerance": float(goal_tolerance),
        "onnx": onnx_section(spec, normalizer_eps, scaling.dim),
    }
    if base is not None and robot_radius is None:
        robot_radius = base.radius
    contract.update(optional_sections(robot_radius, response, path_following, guard))
    if base is not None:
        contract[BASE_SECTION] = base.to_dict()
    if extra:
        contract.update(extra)
    return contract


def observation_section(spec: PolicySpec) -> dict[str, Any]:
    """``observation``: the spec, and each term with its slice of the observation vector."""
    terms, start = [], 0
    for t in spec.terms:
        terms.append({**t.to_dict(), "slice": [start, start + t.width]})
        start += t.width
    return {
        "dim": spec.obs_dim,
        "dtype": "float32",
        "terms": terms,
        "spec": spec.to_dict(),
        "builder": "navcontract.spec.build_policy_obs",
    }


def lidar_section(spec: PolicySpec, trained_fov: float, sim_lidar: dict[str, Any] | None) -> dict[str, Any]:
    """``lidar``: the training beam layout, the range, the field of view trained with, and (for the
    record) how the simulator rendered the scan."""
    d = spec.dims
    return {
        **BeamLayout(d.num_beams).to_dict(),
        "max_range": d.max_range,
        "frame": "base_link; beam j at angle_min + j * angle_increment, 0 = forward, CCW positive",
        "no_return": "max_range",
        "resampling": "navcontract.scan.resample_scan (docs/deploy_contract.md)",
        "trained_fov": float(trained_fov),
        **({"simulator": dict(sim_lidar)} if sim_lidar else {}),
    }


def action_section(scaling: ActionScaling) -> dict[str, Any]:
    """``action``: the scaling rule from the raw ONNX output to a body-frame command."""
    return {
        **scaling.to_dict(),
        "dim": scaling.dim,
        "frame": "base_link (body frame), SI units: m/s, m/s, rad/s",
        "onnx_output": "raw deterministic mean action, BEFORE clip and scaling; "
        "apply navcontract.action.action_to_command exactly once",
    }


def contract_fingerprint(spec: PolicySpec, base: BaseSpec | None = None) -> str:
    """The contract's fingerprint: the spec's without a base; with one, the first 16 hex digits of
    the SHA-256 of the canonical JSON of ``{"spec": <spec fingerprint>, "base": <base section>}``."""
    if base is None:
        return spec.fingerprint()
    canonical = json.dumps({"spec": spec.fingerprint(), "base": base.to_dict()}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def onnx_section(spec: PolicySpec, normalizer_eps: float, action_dim: int = 3) -> dict[str, Any]:
    """``onnx``: the graph's file, input, output and folded-in normaliser."""
    return {
        "file": ONNX_FILE,
        "input": {"name": INPUT_NAME, "shape": ["batch", spec.obs_dim], "dtype": "float32"},
        "output": {"name": OUTPUT_NAME, "shape": ["batch", int(action_dim)], "dtype": "float32"},
        "normalizer": "folded in: (obs - mean) / (std + eps), training buffers, never re-estimated",
        "normalizer_eps": float(normalizer_eps),
        "opset": OPSET,
    }


def optional_sections(
    robot_radius: float | None,
    response: RobotResponse | None,
    path_following: TrainedPathFollowing | None,
    guard: GuardRule | None,
) -> dict[str, Any]:
    """``robot``, ``robot_response``, ``path_following`` and ``guard``, each only when given."""
    out: dict[str, Any] = {}
    if robot_radius is not None:
        out["robot"] = {"radius": float(robot_radius), "shape": "vertical cylinder about base_link"}
    if response is not None:
        out[RESPONSE_SECTION] = response.to_dict()
    if path_following is not None:
        out[PATH_SECTION] = path_following.to_dict()
    if guard is not None:
        out[GUARD_SECTION] = guard.to_dict()
    return out


def _check_beam_layout(lidar: dict[str, Any], layout: BeamLayout) -> None:
    """The lidar section may restate the layout (every export does); it must be ours."""
    ours = layout.to_dict()
    for key in ("angle_min", "angle_increment", "fov"):
        if key in lidar and not math.isclose(float(lidar[key]), ours[key], rel_tol=0.0, abs_tol=1e-9):
            raise BundleError(
                f"contract lidar.{key} = {lidar[key]} is not the training beam layout's {ours[key]} "
                "(navcontract.scan.BeamLayout): this runtime cannot feed such a policy"
            )


def _positive(name: str, value: Any) -> float:
    v = float(value)
    if not (math.isfinite(v) and v > 0):
        raise BundleError(f"contract {name} = {value} must be a finite number > 0")
    return v


def _check_numbers(data: dict[str, Any], c: Contract) -> None:
    """Every number the robot acts on must be finite, positive and say the same in every place the
    contract states it: the limits (top level, ``action`` scaling, the observation spec's dims, which
    the fingerprint covers), the beams and the max range (``lidar`` and the spec)."""
    d = c.spec.dims
    for name in ("v_max", "omega_max"):
        values = {
            name: getattr(c, name),
            f"action.{name}": getattr(c.scaling, name),
            f"observation.spec.{name}": getattr(d, name),
        }
        for where, v in values.items():
            _positive(where, v)
        if len({float(v) for v in values.values()}) != 1:
            raise BundleError(
                f"contract limits disagree: {', '.join(f'{k} = {v}' for k, v in values.items())}; the policy was "
                f"trained with {name} {getattr(d, name)} (observation spec, fingerprint {c.fingerprint})"
            )
    if c.num_beams != d.num_beams:
        raise BundleError(f"contract lidar.num_beams = {c.num_beams}, observation spec num_beams = {d.num_beams}")
    _positive("lidar.max_range", c.max_range)
    if float(c.max_range) != float(d.max_range):
        raise BundleError(f"contract lidar.max_range = {c.max_range}, observation spec max_range = {d.max_range}")
    _positive("control_period", c.control_period)
    _positive("goal_tolerance", c.goal_tolerance)
    if c.robot_radius is not None:
        _positive("robot.radius", c.robot_radius)
    if c.guard is not None and c.robot_radius is not None and c.guard.radius != float(c.robot_radius):
        raise BundleError(f"contract {GUARD_SECTION}.radius = {c.guard.radius}, robot.radius = {c.robot_radius}")
    if c.response is not None and c.response.physics_substep > c.control_period * (1.0 + 1e-9):
        raise BundleError(
            f"contract {RESPONSE_SECTION}.physics_substep = {c.response.physics_substep} s is longer than "
            f"control_period {c.control_period} s"
        )
    fov = _positive("lidar.trained_fov", c.trained_fov)
    if fov > 2.0 * math.pi * (1.0 + 1e-9):
        raise BundleError(f"contract lidar.trained_fov = {fov} rad is more than a full turn")
    if c.action_order != c.scaling.order:
        raise BundleError(
            f"contract action.order {list(c.action_order)} is not the {c.scaling.drive} order {list(c.scaling.order)}"
        )
    dim = int(data["action"].get("dim", 3))
    if dim != len(c.action_order):
        raise BundleError(f"contract action.dim = {dim}, action.order has {len(c.action_order)} entries")


def _parse_response(data: dict[str, Any], version: int) -> RobotResponse | None:
    """The ``robot_response`` section: required in format 2, absent in format 1."""
    section = data.get(RESPONSE_SECTION)
    if version == LEGACY_FORMAT_VERSION:
        if section is not None:
            raise BundleError(
                f"contract format_version {version} carries a {RESPONSE_SECTION} section "
                f"(introduced in format {FORMAT_VERSION}): the contract was edited"
            )
        return None
    if section is None:
        raise BundleError(f"contract format_version {version} has no {RESPONSE_SECTION} section")
    try:
        return RobotResponse.from_dict(section)
    except ResponseError as err:
        raise BundleError(f"contract {err}") from None


def _parse_path_following(data: dict[str, Any]) -> TrainedPathFollowing | None:
    """The optional ``path_following`` section (either format); None when absent."""
    if PATH_SECTION not in data:
        return None
    try:
        return TrainedPathFollowing.from_dict(data[PATH_SECTION])
    except PathFollowingError as err:
        raise BundleError(f"contract {err}") from None


def implied_reaction(data: dict[str, Any], response: RobotResponse | None) -> float:
    """[s] The guard's reaction time a contract implies (:func:`navcontract.guard.reaction_time`):
    its control period, plus the trained latency budget and the actuator's largest time constant
    (none in a format-1 contract)."""
    period = data.get("control_period")
    if isinstance(period, bool) or not isinstance(period, int | float) or not math.isfinite(period) or period <= 0:
        raise BundleError(f"contract control_period must be a finite number > 0, got {period!r}")
    return response_reaction(float(period), response)


def _parse_guard(data: dict[str, Any], response: RobotResponse | None) -> GuardRule | None:
    """The optional ``guard`` section (either format); None when absent. Every key of
    :class:`GuardRule` must be there, as a number; without ``reaction``, the contract's
    (:func:`implied_reaction`)."""
    if GUARD_SECTION not in data:
        return None
    section = data[GUARD_SECTION]
    if not isinstance(section, dict):
        raise BundleError(f"contract {GUARD_SECTION} must be a mapping, got {type(section).__name__}")
    try:
        return GuardRule.from_dict(section, reaction=implied_reaction(data, response))
    except ValueError as err:
        raise BundleError(f"contract {err}") from None


def parse_contract(data: dict[str, Any]) -> Contract:
    """Check the contract's shape and self-consistency; return the typed view."""
    if data.get("format") != FORMAT:
        raise BundleError(f"not a {FORMAT} contract (format={data.get('format')!r})")
    version = data.get("format_version")
    if version not in (LEGACY_FORMAT_VERSION, FORMAT_VERSION) or isinstance(version, bool):
        raise BundleError(
            f"contract format_version {version!r} unsupported (this runtime reads {LEGACY_FORMAT_VERSION} "
            f"and {FORMAT_VERSION})"
        )
    response = _parse_response(data, int(version))
    path_following = _parse_path_following(data)
    guard = _parse_guard(data, response)
    try:
        obs = data["observation"]
        spec = spec_from_dict(obs["spec"])
        lidar = data["lidar"]
        action = data["action"]
        scaling = ActionScaling.from_dict(action)
        layout = BeamLayout(int(lidar["num_beams"]))
        radius = (data.get("robot") or {}).get("radius")
        contract = Contract(
            spec=spec,
            fingerprint=str(data["fingerprint"]),
            obs_dim=int(obs["dim"]),
            term_names=tuple(t["name"] for t in obs["terms"]),
            num_beams=int(lidar["num_beams"]),
            max_range=float(lidar["max_range"]),
            beams=layout,
            v_max=float(data["v_max"]),
            omega_max=float(data["omega_max"]),
            scaling=scaling,
            action_order=tuple(action["order"]),
            control_period=float(data["control_period"]),
            goal_tolerance=float(data["goal_tolerance"]),
            robot_radius=None if radius is None else float(radius),
            raw=data,
            trained_fov=float(lidar.get("trained_fov", 2.0 * math.pi)),
            response=response,
            path_following=path_following,
            guard=guard,
        )
    except (KeyError, TypeError, ValueError) as err:
        raise BundleError(f"malformed contract: {type(err).__name__}: {err}") from None
    _check_beam_layout(data["lidar"], contract.beams)
    _check_numbers(data, contract)
    stated = _parse_base(data)
    base = stated if stated is not None else _derived_base(contract)
    contract = replace(contract, base=base)
    if base is not None:
        _check_base(contract, base)
    expected = contract_fingerprint(spec, stated)
    if expected != contract.fingerprint:
        covers = f"its own observation spec and {BASE_SECTION} section" if stated else "its own observation spec"
        raise BundleError(
            f"contract fingerprint {contract.fingerprint} does not match {covers} ({expected}): the contract "
            "was edited or corrupted"
        )
    if spec.obs_dim != contract.obs_dim or list(contract.term_names) != [t.name for t in spec.terms]:
        raise BundleError("contract observation terms/dim disagree with its spec")
    return contract


def _parse_base(data: dict[str, Any]) -> BaseSpec | None:
    """The optional ``base`` section (either format): every key of a base file and its ``name``."""
    if BASE_SECTION not in data:
        return None
    section = data[BASE_SECTION]
    if not isinstance(section, dict):
        raise BundleError(f"contract {BASE_SECTION} must be a mapping, got {type(section).__name__}")
    if not isinstance(section.get("name"), str) or not section["name"]:
        raise BundleError(f"contract {BASE_SECTION}.name must be a non-empty string, got {section.get('name')!r}")
    try:
        return BaseSpec.checked(section, name=section["name"], where=f"contract {BASE_SECTION}")
    except BaseError as err:
        raise BundleError(str(err)) from None


def _derived_base(c: Contract) -> BaseSpec | None:
    """The base a contract without the ``base`` section stands for: its action's drive and limits on
    ``robot.radius``, with the holonomic disc preset's accelerations; named ``holonomic_disc`` when
    it is that preset, else ``unnamed``. None without ``robot.radius``."""
    if c.robot_radius is None:
        return None
    s = c.scaling
    preset = load_base(DEFAULT_BASE)
    values = {
        "drive": s.drive,
        "radius": float(c.robot_radius),
        "v_forward": s.v_max,
        "v_backward": s.backward,
        "v_lateral": s.v_max if s.drive == HOLONOMIC else 0.0,
        "limit_planar_speed": s.limit_planar_speed,
        "omega_max": s.omega_max,
        "accel_linear": preset.accel_linear,
        "accel_angular": preset.accel_angular,
    }
    name = DEFAULT_BASE if values == {k: getattr(preset, k) for k in BaseSpec.keys()} else "unnamed"
    try:
        return BaseSpec.checked(values, name=name, where="contract action and robot sections")
    except BaseError as err:
        raise BundleError(str(err)) from None


def _check_base(c: Contract, base: BaseSpec) -> None:
    """The base, the action rule and the footprint say the same: drive, limits, radius."""
    s = c.scaling
    pairs = {
        "drive": (base.drive, "action.drive", s.drive),
        "v_forward": (base.v_forward, "action.v_max", s.v_max),
        "omega_max": (base.omega_max, "action.omega_max", s.omega_max),
        "limit_planar_speed": (base.limit_planar_speed, "action.limit_planar_speed", s.limit_planar_speed),
        "radius": (base.radius, "robot.radius", c.robot_radius),
    }
    if base.holonomic:
        pairs["v_backward"] = (base.v_backward, "action.v_max (a holonomic action has one speed limit)", s.v_max)
        pairs["v_lateral"] = (base.v_lateral, "action.v_max (a holonomic action has one speed limit)", s.v_max)
    else:
        pairs["v_backward"] = (base.v_backward, "action.v_backward", s.backward)
    for key, (ours, where, theirs) in pairs.items():
        if ours != theirs:
            raise BundleError(f"contract {BASE_SECTION}.{key} = {ours!r}, {where} = {theirs!r}")


# ----------------------------------------------------------------------------------------------
# Reading


def onnx_metadata(onnx_path: str | Path) -> dict[str, str]:
    """The ONNX file's custom metadata, read through onnxruntime (no onnx package needed)."""
    import onnxruntime as ort

    sess = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    return dict(sess.get_modelmeta().custom_metadata_map)


def read_contract(bundle_dir: str | Path, metadata: dict[str, str] | None = None) -> Contract:
    """The bundle's contract; ``contract.json`` and the ONNX metadata copy must be identical.

    ``contract.json`` may be absent (the ONNX file alone is a complete bundle).
    """
    bdir = Path(bundle_dir)
    onnx_path = bdir / ONNX_FILE
    if not onnx_path.is_file():
        raise BundleError(f"no {ONNX_FILE} in {bdir}")
    meta = metadata if metadata is not None else onnx_metadata(onnx_path)
    if METADATA_KEY not in meta:
        raise BundleError(f"{onnx_path} carries no '{METADATA_KEY}' metadata: not a nav_policy export")
    embedded = json.loads(meta[METADATA_KEY])
    cfile = bdir / CONTRACT_FILE
    if cfile.is_file():
        beside = json.loads(cfile.read_text())
        if beside != embedded:
            keys = sorted(k for k in set(beside) | set(embedded) if beside.get(k) != embedded.get(k))
            raise BundleError(f"{CONTRACT_FILE} differs from the contract inside {ONNX_FILE} (keys: {keys})")
    contract = parse_contract(embedded)
    if meta.get(FINGERPRINT_KEY, contract.fingerprint) != contract.fingerprint:
        raise BundleError("ONNX fingerprint metadata differs from the embedded contract's fingerprint")
    return contract
