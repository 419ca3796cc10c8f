"""The robot-side policy runtime: numpy and onnxruntime only (importing it never imports torch).

::

    rt = PolicyRuntime.load(bundle_dir)      # checks the bundle's contract against our own spec
    cmd = rt.step(scan, pose, twist, goal)    # np.ndarray (3,) [vx, vy, wz], SI, body frame

The observation is built by :func:`navcontract.spec.build_policy_obs`, the very function training
uses, from an :class:`~navcontract.terms.ObsContext` of robot-side quantities: the scan resampled
onto the training beams (:mod:`navcontract.scan`), the odometry pose and body-frame twist, the goal
in the odometry frame and the previous (clipped) action. The ONNX model returns the raw mean
action, ``scaling.dim`` numbers (3 for a holonomic base, ``(v, w)`` for a diff-drive one: the
contract's ``action`` section); :func:`navcontract.action.action_to_command` turns it into the
command ``[vx, vy, wz]``, exactly once (``vy`` 0 for a diff drive).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from navcontract.action import ActionScaling, action_to_command, clip_action
from navcontract.base import DIFF_DRIVE
from navcontract.bundle import ONNX_FILE, BundleError, Contract, read_contract
from navcontract.scan import ScanInput, ScanOptions, ScanReport, ScanUnusable, resample_scan
from navcontract.spec import PolicySpec, build_policy_obs, compare_specs, make_policy_spec
from navcontract.terms import DEPLOYABLE_TERMS, ObsContext

__all__ = [
    "ContractError",
    "PolicyRuntime",
    "ScanInput",
    "ScanOptions",
    "ScanReport",
    "ScanUnusable",
    "registry_spec_for",
]


class ContractError(BundleError):
    """The bundle's observation contract differs from the runtime's own observation spec."""


def registry_spec_for(contract: Contract) -> PolicySpec:
    """This runtime's spec for the bundle's enabled terms and params, from our own term registry.

    Catches terms we do not know, and terms whose width or version (meaning) changed in our code
    since the policy was trained.
    """
    unknown = [n for n in contract.term_names if n not in DEPLOYABLE_TERMS]
    if unknown:
        raise ContractError(f"bundle uses observation term(s) this runtime does not have: {', '.join(unknown)}")
    return make_policy_spec({t.name: dict(t.params) for t in contract.spec.terms}, contract.spec.dims)


def finite_vector(x: Any, n: int, what: str) -> np.ndarray:
    """``x`` as ``n`` finite float64 values (pose, twist, goal); ValueError naming ``what`` otherwise."""
    a = np.asarray(x, dtype=np.float64).reshape(-1)
    if a.shape[0] != n:
        raise ValueError(f"{what} needs {n} values, got {a.shape[0]}")
    if not np.isfinite(a).all():
        raise ValueError(f"{what} has non-finite values: {a.tolist()}")
    return a


def _dims(shape: Any) -> list[Any]:
    return list(shape) if shape is not None else []


def check_session_io(session: Any, contract: Contract) -> None:
    """The ONNX graph must take exactly one float32 input (batch, obs_dim) and return exactly one
    float32 output (batch, scaling.dim): 3 for a holonomic base, 2 for a diff-drive one; BundleError
    naming what differs otherwise (a symbolic or free batch dimension is fine, a fixed width that
    differs is not)."""
    ins, outs = session.get_inputs(), session.get_outputs()
    act = contract.scaling.dim
    if len(ins) != 1 or len(outs) != 1:
        raise BundleError(
            f"ONNX graph has {len(ins)} input(s) {[i.name for i in ins]} and {len(outs)} output(s) "
            f"{[o.name for o in outs]}; the contract needs exactly one input (batch, {contract.obs_dim}) "
            f"and one output (batch, {act})"
        )
    for what, arg, width in (("input", ins[0], contract.obs_dim), ("output", outs[0], act)):
        dims = _dims(arg.shape)
        fixed_batch = isinstance(dims[0], int) and dims[0] > 1 if dims else False
        if len(dims) != 2 or dims[-1] != width or fixed_batch:
            declared = (
                f"the contract's {contract.scaling.drive} action {list(contract.scaling.order)}"
                if what == "output"
                else "the contract"
            )
            raise BundleError(f"ONNX {what} '{arg.name}' has shape {dims}, {declared} needs [batch, {width}]")
        if str(arg.type) != "tensor(float)":
            raise BundleError(f"ONNX {what} '{arg.name}' is {arg.type}, the contract declares float32")


def observed_action(clipped: np.ndarray, scaling: ActionScaling) -> np.ndarray:
    """The (N, 3) previous action the observation reads, from (N, scaling.dim) clipped actions: a
    holonomic action as it is, a diff-drive ``(v, w)`` in command order ``(v, 0, w)``."""
    a = np.asarray(clipped, dtype=np.float32).reshape(-1, scaling.dim)
    if scaling.drive != DIFF_DRIVE:
        return a
    return np.stack([a[:, 0], np.zeros_like(a[:, 0]), a[:, 1]], axis=-1)


class ContractScanReader:
    """Reads robot scans on a contract's training beams by the node's scan options (the one scan rule,
    :func:`navcontract.scan.resample_scan`, against the field of view the policy was trained with);
    shared by every controller the node can drive (the policy runtime, the DWA baseline)."""

    contract: Contract
    scan_options: ScanOptions
    last_scan_report: ScanReport | None = None
    _read_scan: ScanInput | None = None  # the scan last_scan_report was read from, and with which options
    _read_options: ScanOptions | None = None

    def configure_scan(self, options: ScanOptions) -> None:
        """Use ``options`` (the node's scan parameters) for every scan from now on."""
        self.scan_options = options

    def resample(self, scan: ScanInput) -> np.ndarray:
        """The scan on the training beams (metres); raises ScanUnusable. Remembers what it saw in
        :attr:`last_scan_report` (also when it refuses a scan for doubt). The same scan object read
        again with the same options is not resampled again (the command gate reads a tick's scan before
        the driver's step does)."""
        c = self.contract
        report = self.last_scan_report
        if report is not None and self._read_scan is scan and self._read_options is self.scan_options:
            return report.ranges
        try:
            report = resample_scan(
                scan, c.num_beams, c.max_range, options=self.scan_options, trained_fov=c.trained_fov, return_report=True
            )
        except ScanUnusable as exc:
            self.last_scan_report = exc.report
            self._read_scan = None
            raise
        self.last_scan_report = report
        self._read_scan, self._read_options = scan, self.scan_options
        return report.ranges


class PolicyRuntime(ContractScanReader):
    """A loaded bundle: builds observations, runs the policy, returns body-frame commands."""

    def __init__(self, session: Any, contract: Contract, scan_options: ScanOptions | None = None) -> None:
        self.session = session
        self.contract = contract
        self.spec = contract.spec
        self.scan_options = scan_options or ScanOptions()
        check_session_io(session, contract)
        self.input_name = session.get_inputs()[0].name
        self.output_name = session.get_outputs()[0].name
        self._prev_action = np.zeros((1, 3), dtype=np.float32)
        self.last_scan_report: ScanReport | None = None
        """What the last :meth:`resample` saw (the policy's beams, coverage, filled sectors), or None."""

    @classmethod
    def load(
        cls,
        bundle_dir: str | Path,
        spec: PolicySpec | None = None,
        scan_options: ScanOptions | None = None,
        providers: list[str] | None = None,
    ) -> PolicyRuntime:
        """Load ``bundle_dir`` (policy.onnx [+ contract.json]) and check its contract.

        ``spec`` is an observation spec the bundle must match (e.g. the one a training config
        declares); without it the runtime checks the bundle against its own term registry
        (names, widths and versions of the terms for the bundle's params). Any difference raises
        :class:`ContractError` naming the differing term(s).
        """
        import onnxruntime as ort

        bdir = Path(bundle_dir)
        onnx_path = bdir / ONNX_FILE
        if not onnx_path.is_file():
            raise BundleError(f"no {ONNX_FILE} in {bdir}")
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        opts.inter_op_num_threads = 1
        session = ort.InferenceSession(str(onnx_path), opts, providers=providers or ["CPUExecutionProvider"])
        contract = read_contract(bdir, dict(session.get_modelmeta().custom_metadata_map))
        own = spec if spec is not None else registry_spec_for(contract)
        diffs = compare_specs(contract.spec, own)
        if diffs or own.fingerprint() != contract.spec_fingerprint:
            raise ContractError(
                f"observation contract mismatch: bundle spec fingerprint {contract.spec_fingerprint}, runtime "
                f"{own.fingerprint()}: " + "; ".join(diffs or ["(no field-level difference found)"])
            )
        return cls(session, contract, scan_options)

    # ------------------------------------------------------------------------------------------

    @property
    def prev_action(self) -> np.ndarray:
        """The previous clipped action as the observation reads it (3,) (:func:`observed_action`)."""
        return self._prev_action[0].copy()

    def reset(self) -> None:
        """Forget the previous action (new goal or new episode), as the simulator's reset does."""
        self._prev_action = np.zeros((1, 3), dtype=np.float32)

    def observation(self, scan: ScanInput, pose: Any, twist: Any, goal: Any) -> np.ndarray:
        """The (obs_dim,) float32 policy observation.

        pose: (x, y, yaw) of base_link in the odom frame; twist: (vx, vy, wz) in the body frame
        (m/s, rad/s); goal: (gx, gy) in the odom frame.
        """
        ranges = self.resample(scan)
        ctx = ObsContext(
            scan=ranges[None, :],
            pose=finite_vector(pose, 3, "pose")[None, :],
            twist=finite_vector(twist, 3, "twist")[None, :],
            goal=finite_vector(goal, 2, "goal")[None, :],
            prev_action=self._prev_action.astype(np.float64),
            dims=self.spec.dims,
        )
        obs = build_policy_obs(ctx, self.spec)
        return np.asarray(obs[0], dtype=np.float32)

    def act(self, obs: np.ndarray) -> np.ndarray:
        """Raw policy action(s) for observation(s) (obs_dim,) or (N, obs_dim): before clip/scaling."""
        x = np.asarray(obs, dtype=np.float32)
        single = x.ndim == 1
        x = x.reshape(-1, self.contract.obs_dim)
        out = self.session.run([self.output_name], {self.input_name: x})[0]
        return out[0] if single else out

    def command(self, raw_action: np.ndarray) -> np.ndarray:
        """Raw action (``scaling.dim`` numbers) -> (3,) [vx, vy, wz] in m/s, m/s, rad/s, body frame
        (clip + scaling; vy 0.0 for a diff-drive base)."""
        raw = np.asarray(raw_action, dtype=np.float32).reshape(1, self.contract.scaling.dim)
        return np.asarray(action_to_command(raw, self.contract.scaling)[0], dtype=np.float64)

    def step(self, scan: ScanInput, pose: Any, twist: Any, goal: Any) -> np.ndarray:
        """Observation -> policy -> command; remembers the clipped action as the previous one.

        Raises ScanUnusable (before touching any state) when the scan carries no information. The
        ranges the observation was built from stay in ``last_scan_report.ranges`` (the controller's
        collision guard reads them there).
        """
        obs = self.observation(scan, pose, twist, goal)
        raw = self.act(obs)
        cmd = self.command(raw)
        scaling = self.contract.scaling
        self._prev_action = observed_action(clip_action(raw.reshape(1, scaling.dim)), scaling)
        return cmd

    def goal_reached(self, pose: Any, goal: Any) -> bool:
        """Within the contract's goal tolerance (the simulator's success radius)."""
        p = finite_vector(pose, 3, "pose")
        g = finite_vector(goal, 2, "goal")
        return bool(np.hypot(g[0] - p[0], g[1] - p[1]) < self.contract.goal_tolerance)
