"""The scan map off the control path: the map's update and its planning on a worker process.

:class:`ScanPlannerWorker` has the interface the command gate uses of
:class:`navdeploy.scan_map.ScanPlanner` (``step``, ``new_goal``, ``reset``, ``remaining``) and runs the
same planner, in a process of its own:

- each tick with a new scan hands the scan, the pose, the goal, the time and the robot's progress
  along the path in use to the worker (:meth:`ScanPlannerWorker.step` keeps it,
  :meth:`~ScanPlannerWorker.dispatch` sends it at the end of the gate's tick) and returns at once,
  never waiting for it. At most :data:`IN_FLIGHT` scans are on their way; a newer scan replaces one
  still waiting to be sent, so a worker that falls behind gets the latest scan (the ones in between
  are not mapped);
- the worker folds each scan it gets into its map and, for the newest of those it finds waiting,
  plans as the synchronous planner does at a tick (:meth:`ScanPlanner.update_path`: again every
  ``replan_period``, at once when the path ahead is blocked), then sends back the path in use and
  the clearance round the robot and the path ahead (:meth:`ScanPlanner.sight_clearance`);
- a path the guard keeps refusing (:meth:`ScanPlannerWorker.block`, from the gate) and a re-plan
  after a recovery (:meth:`~ScanPlannerWorker.replan`) go to the worker before the tick's scan: the
  worker raises the return (:meth:`ScanPlanner.block`) or just plans again, for the next scan it
  folds;
- the worker takes at most :data:`DUTY` of a CPU (``duty``): after each batch it rests three times as
  long as the batch took, so a robot computer keeps its cores for the control loop and the other
  nodes however fast scans come (a simulation run faster than real time included); scans that come
  meanwhile wait, and the newest is planned for when it rests no more;
- the tick takes the newest plan that has come back and follows it itself
  (:func:`navdeploy.scan_map.follow_on`, the line-of-sight check on the clearance that came with it:
  no map update, distance transform or search in the tick). A new path begins where the robot was at
  the scan it was planned for; the tick finds the robot on it over the lookahead rule's search window
  plus the distance the robot drove since that scan, so a late plan's first sub-goal is not behind
  the robot. Until the first plan of a goal comes back the tick has no
  sub-goal (the gate drives to the goal itself, as when the map has no path).

A process, not a thread: scipy's shortest-path search holds the interpreter lock for its whole run
(tens of milliseconds on a large box), which would stall the control tick of a thread sharing it.

The worker is started by :meth:`ScanPlannerWorker.start` (the node does it at startup), else with the
first scan; :meth:`ScanPlannerWorker.close` stops it, and it ends by itself when its parent does
(the connection closes). A failure in the worker (an exception while planning, the process ending)
raises once from the next :meth:`~ScanPlannerWorker.step` (the gate's tick then stops with
``error``, as an exception of the synchronous planner does); a worker that ended is started again
with an empty map on the next scan, at most :data:`MAX_RESTARTS` times.

With ``lockstep`` every step waits for the worker to fold and plan its scan: the plans are then those
of the synchronous planner tick by tick (the tests check this); the node never sets it.
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import socket
import struct
import subprocess
import sys
import time
import traceback
import weakref
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

import numpy as np

from navcontract.scan import LidarMount
from navcontract.subgoal import LookaheadRule
from navdeploy.grid_search import GridFrame
from navdeploy.scan_map import (
    PathShape,
    ScanMapCfg,
    ScanPlanner,
    SightRule,
    checked_geometry,
    follow_on,
    plan_radii,
    sensor_rays,
    visible,
)

IN_FLIGHT = 2
"""Scans handed to the worker and not yet answered, at most."""

SIGHT_GRID_SLACK = 1.0
"""[m] The clearance sent with a plan covers the robot moving this far before the next plan comes."""

MAX_RESTARTS = 3
"""A worker that ended is started again this many times at most."""

NICE = 5
"""The worker's niceness above the node's: planning waits for the control tick, never the reverse."""

DUTY = 0.25
"""The share of one CPU the worker takes at most: after each batch it rests ``1 / DUTY - 1`` times as
long as the batch took (at most :data:`MAX_REST`), whatever the rate scans come at."""

MAX_REST = 0.3
"""[s] The longest rest after a batch."""

LOCKSTEP_TIMEOUT = 60.0
"""[s] With ``lockstep``, a step waits this long for its plan at most."""


@dataclass(frozen=True)
class Job:
    """One scan for the worker, with what the tick knew when it came."""

    seq: int
    generation: int  # the goal it was taken for (new_goal and reset start a new one)
    ranges: np.ndarray
    angle_min: float
    angle_increment: float
    range_min: float
    range_max: float
    pose: np.ndarray  # (3,) odometry frame
    goal: np.ndarray  # (2,)
    now: float
    path_id: int  # the path the tick follows (the worker's id), its progress and what is left of it
    progress: float
    remaining: float
    odometer: float  # [m] how far the robot had driven at this tick (the tick side's count)
    mount: LidarMount | None = None  # where the scan's lidar sits on the body (None: the centre)


@dataclass(frozen=True)
class Plan:
    """What the worker sends back after the newest scan of a batch: its path and the clearance round it."""

    seq: int
    generation: int
    path_id: int
    path: np.ndarray | None
    path_radius: float
    progress: float
    remaining: float
    failed: bool
    retreating: bool  # the path backs out along the robot's trail (ScanPlanner.retreating)
    plans: int
    sight: tuple[GridFrame, np.ndarray] | None
    sight_rule: SightRule
    busy_s: float  # the worker's time on the batch
    odometer: float  # the odometer of the job planned for (a new path starts where the robot was then)


@dataclass(frozen=True)
class Ack:
    """The answer to a batch whose newest scan was followed by a new goal (nothing to plan for it)."""

    seq: int


@dataclass(frozen=True)
class Failure:
    """An exception in the worker while folding or planning."""

    seq: int
    text: str


# ------------------------------------------------------------------------------------ worker side


def _fold(planner: ScanPlanner, job: Job) -> None:
    origin, angles = sensor_rays(job, job.pose, len(job.ranges))
    planner.map.update(job.ranges, angles, origin, job.range_min, job.range_max)


def _plan(planner: ScanPlanner, job: Job, slack: float, started: float) -> Plan:
    """The synchronous planner's update at ``job``'s tick, and what the tick needs to follow the path."""
    if job.path_id == planner.path_id:  # the tick's progress along the path it follows
        planner.progress, planner.remaining = job.progress, job.remaining
    p = np.asarray(job.pose[:2], dtype=np.float64)
    planner.update_path(p, np.asarray(job.goal, dtype=np.float64), job.now)
    return Plan(
        seq=job.seq,
        generation=job.generation,
        path_id=planner.path_id,
        path=planner.path,
        path_radius=planner.path_radius,
        progress=planner.progress,
        remaining=planner.remaining,
        failed=planner.failed,
        retreating=planner.retreating,
        plans=planner.plans,
        sight=planner.sight_clearance(p, slack) if planner.cfg.line_of_sight else None,
        sight_rule=planner.sight_rule,
        busy_s=time.perf_counter() - started,
        odometer=job.odometer,
    )


def _batch(planner: ScanPlanner, batch: list[tuple], slack: float) -> Plan | Ack | Failure | None:
    """Fold every scan of ``batch`` in order, apply new goals and resets, plan for the newest scan when
    nothing came after it; the answer (None: no scan in the batch)."""
    started = time.perf_counter()
    job: Job | None = None
    seq: int | None = None
    try:
        for msg in batch:
            if msg[0] == "job":
                job = msg[1]
                seq = job.seq
                _fold(planner, job)
            elif msg[0] == "new_goal":
                planner.new_goal()
                job = None
            elif msg[0] == "reset":
                planner.reset()
                job = None
            elif msg[0] == "block":
                planner.block(msg[1])
            elif msg[0] == "replan":
                planner.replan()
        if seq is None:
            return None
        if job is None:
            return Ack(seq)
        return _plan(planner, job, slack, started)
    except Exception as exc:
        text = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=4)}"
        return Failure(-1 if seq is None else seq, text)


def serve(conn: Connection) -> None:
    """The worker's loop: build the planner from the first message, then answer batches until
    ``stop`` or until the connection closes (the parent ended)."""
    try:
        factory, cfg, radius, rule, slack, duty, clearance = conn.recv()
        planner = factory(cfg, radius, rule) if clearance is None else factory(cfg, radius, rule, clearance=clearance)
        while True:
            batch = [conn.recv()]
            while conn.poll():
                batch.append(conn.recv())
            if any(msg[0] == "stop" for msg in batch):
                return
            started = time.perf_counter()
            answer = _batch(planner, batch, slack)
            if answer is not None:
                conn.send(answer)
            busy = time.perf_counter() - started
            time.sleep(min(busy * (1.0 / duty - 1.0), MAX_REST))  # its share of a CPU: at most duty
    except (EOFError, OSError, KeyboardInterrupt):
        return


def yield_to_control() -> None:
    """Make this process give way to the control tick on a shared CPU: batch scheduling (it never
    preempts the node when a scan wakes it) and :data:`NICE` (where the OS allows)."""
    try:
        os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
    except (AttributeError, OSError):
        pass
    try:
        os.nice(NICE)
    except OSError:
        pass


def main() -> None:
    """Entry of the worker process: ``python -c 'from navdeploy.scan_worker import main; main()' FD``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's; it stops the worker
    yield_to_control()
    serve(Connection(int(sys.argv[1])))


# -------------------------------------------------------------------------------------- tick side


class _Link:
    """The tick's end of the socket to the worker, in the framing of
    :class:`multiprocessing.connection.Connection` (a 4-byte big-endian length, then a pickle), which
    the worker reads and writes. Sends go out whole (a few kilobytes, at most :data:`IN_FLIGHT` scans
    unanswered); :meth:`receive` never waits: it takes what the socket holds and returns the messages
    that have fully arrived. No thread: the tick never waits for the interpreter lock either."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = bytearray()
        self.ended = False

    def send(self, msg: Any) -> None:
        data = pickle.dumps(msg, protocol=pickle.HIGHEST_PROTOCOL)
        try:
            self.sock.sendall(struct.pack("!i", len(data)) + data)
        except OSError:
            self.ended = True  # the worker is gone; the next step says so

    def receive(self) -> list[Any]:
        while not self.ended:
            try:
                chunk = self.sock.recv(1 << 20, socket.MSG_DONTWAIT)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                chunk = b""
            if not chunk:
                self.ended = True
                break
            self.buf += chunk
        out = []
        while len(self.buf) >= 4:
            (n,) = struct.unpack("!i", self.buf[:4])
            if len(self.buf) < 4 + n:
                break
            out.append(pickle.loads(self.buf[4 : 4 + n]))
            del self.buf[: 4 + n]
        return out

    def wait(self, timeout: float) -> None:
        """Until something arrives, at most ``timeout`` seconds (lockstep only)."""
        select.select([self.sock], [], [], max(timeout, 0.0))


def _shutdown(proc: subprocess.Popen, link: _Link) -> None:
    """Stop the worker: ask, then wait a little, then kill; close the socket."""
    link.send(("stop",))
    try:
        proc.wait(timeout=2.0)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    link.sock.close()


@dataclass
class _Running:
    proc: subprocess.Popen
    link: _Link
    finalizer: Any
    acked: int = 0  # the highest scan answered
    plan: Plan | None = None  # the newest plan not yet taken
    failures: list[str] = field(default_factory=list)


class ScanPlannerWorker:
    """:class:`navdeploy.scan_map.ScanPlanner` on a worker process (module doc); ``planner``: what the
    worker builds as ``planner(cfg, radius, rule)`` (a class or function it can import by name), with
    ``clearance=`` the guard's passing clearance when one is given."""

    def __init__(
        self,
        cfg: ScanMapCfg,
        radius: float,
        rule: LookaheadRule | None = None,
        planner: Callable[..., ScanPlanner] = ScanPlanner,
        lockstep: bool = False,
        duty: float = DUTY,
        clearance: float | None = None,
    ) -> None:
        self.cfg = cfg
        self.radius, self.clearance = checked_geometry(radius, clearance)
        self.rule = rule if rule is not None else LookaheadRule()
        if not 0.0 < duty <= 1.0:
            raise ValueError(f"scan map worker: duty must be in (0, 1], got {duty}")
        self.factory, self.lockstep, self.duty = planner, lockstep, float(duty)
        self.restarts = 0
        self.timings: deque[tuple[float, float]] = deque(maxlen=100_000)  # per plan taken: (age, worker busy) [s]
        self._run: _Running | None = None
        self._generation = 0
        self._seq = 0
        self._pending: Job | None = None
        self._sent_at: dict[int, float] = {}
        self.odometer = 0.0  # [m] how far the robot has driven, from the poses of the ticks
        self._last_p: np.ndarray | None = None
        self._forget()

    def _forget(self) -> None:
        self.path: np.ndarray | None = None
        self.path_id = -1
        self.progress = 0.0
        self.remaining = 0.0
        self.path_radius = plan_radii(self.cfg, self.radius, self.clearance)[0]
        self.plans = 0
        self.failed = False
        self.retreating = False
        self._sight: tuple[GridFrame, np.ndarray] | None = None
        self._sight_rule: SightRule | None = None
        self._pending = None
        self._shape: PathShape | None = None  # the path's, kept while it is followed

    # ------------------------------------------------------------------ lifecycle
    @property
    def running(self) -> bool:
        return self._run is not None and self._run.proc.poll() is None

    def start(self) -> None:
        """Start the worker process (once; a no-op while it runs)."""
        if self._run is not None:
            return
        ours, theirs = socket.socketpair()
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        proc = subprocess.Popen(
            [sys.executable, "-c", "from navdeploy.scan_worker import main; main()", str(theirs.fileno())],
            pass_fds=(theirs.fileno(),),
            env=env,
        )
        theirs.close()
        link = _Link(ours)
        link.send((self.factory, self.cfg, self.radius, self.rule, SIGHT_GRID_SLACK, self.duty, self.clearance))
        self._run = _Running(proc, link, weakref.finalize(self, _shutdown, proc, link))
        self._sent_at = {}

    def close(self) -> None:
        """Stop the worker (the map is lost); a later scan starts a new one."""
        if self._run is not None:
            self._run.finalizer()
            self._run = None
        self._forget()

    # ------------------------------------------------------------------ the gate's interface
    def new_goal(self) -> None:
        """Drop the path; the map stays (the worker drops its path too)."""
        self._generation += 1
        self._forget()
        self._send(("new_goal", self._generation))

    def reset(self) -> None:
        """Forget the map and the path."""
        self._generation += 1
        self._forget()
        self._send(("reset", self._generation))

    def block(self, point: np.ndarray) -> None:
        """The guard keeps refusing the path by the return at ``point``: the worker raises it and plans
        again for the next scan it folds (:meth:`ScanPlanner.block`); the tick follows the path in use
        until that plan comes back."""
        self.start()
        self._send(("block", np.asarray(point, dtype=np.float64)[:2].copy()))

    def replan(self) -> None:
        """The worker plans again for the next scan it folds (:meth:`ScanPlanner.replan`)."""
        self.start()
        self._send(("replan",))

    def step(
        self, scan: Any | None, pose: np.ndarray, goal: tuple[float, float], now: float
    ) -> tuple[float, float] | None:
        """One control tick: hand ``scan`` (None: no new scan) to the worker, take the newest plan that
        came back, and return the sub-goal along it (None: no plan yet, or no path on the map)."""
        self._check()
        p = np.asarray(pose[:2], dtype=np.float64)
        if self._last_p is not None:
            self.odometer += float(np.hypot(*(p - self._last_p)))
        self._last_p = p
        if scan is not None:
            self._submit(scan, pose, goal, now)
        if self.lockstep:
            self.dispatch()
            self._wait(self._seq)
        self._take()
        return self.follow(np.asarray(pose[:2], dtype=np.float64))

    def dispatch(self) -> None:
        """Send the newest scan of :meth:`step` to the worker (when fewer than :data:`IN_FLIGHT` are
        unanswered; else it waits for a later call). The gate calls it at the end of its tick, the node
        once the tick's command is published: the worker computes while the node waits for its next
        tick, not while the command is made or on its way."""
        self._flush()

    def follow(self, p: np.ndarray) -> tuple[float, float] | None:
        """Advance along the path in use from ``p``; the sub-goal, as :meth:`ScanPlanner.follow`."""
        if self.path is None:
            return None
        self._shape = shape = PathShape.of(self._shape, self.path)
        sub, self.progress, self.remaining = follow_on(self.path, self.progress, self.rule, p, shape)
        if self.cfg.line_of_sight and self._sight_rule is not None:
            lookahead, rule = self.rule.lookahead, self._sight_rule
            return visible(self.path, self.progress, lookahead, p, sub, rule, self._sight_grid, shape.arc)
        return float(sub[0]), float(sub[1])

    # ------------------------------------------------------------------ internals
    def _catch_up(self, plan: Plan) -> None:
        """A new path starts where the robot was at the scan it was planned for; the robot has driven
        on since. Its progress along the new path is the projection of the robot's last pose searched
        over the lookahead rule's window plus the distance driven since that scan, so that the first
        sub-goal lies ahead of the robot, not behind it where the path began."""
        if self.path is None or self._last_p is None:
            return
        driven = max(self.odometer - plan.odometer, 0.0)
        if driven <= 0.0:
            return
        wide = LookaheadRule(self.rule.lookahead, self.rule.search_window + driven)
        self._shape = shape = PathShape.of(self._shape, self.path)
        _, self.progress, self.remaining = follow_on(self.path, self.progress, wide, self._last_p, shape)

    def _sight_grid(self, points: np.ndarray, margin: float) -> tuple[GridFrame, np.ndarray] | None:
        """The clearance that came with the plan, when its box holds ``points`` (else None)."""
        if self._sight is None:
            return None
        frame, clear = self._sight
        H, W = clear.shape
        lo, hi = points.min(axis=0), points.max(axis=0)
        inside = lo[0] >= frame.x0 and lo[1] >= frame.y0
        inside = inside and hi[0] < frame.x0 + W * frame.sx and hi[1] < frame.y0 + H * frame.sy
        return (frame, clear) if inside else None

    def _receive(self) -> None:
        """Take what came back (never waits): the highest answered scan, the newest plan, failures."""
        run = self._run
        if run is None:
            return
        for msg in run.link.receive():
            run.acked = max(run.acked, int(msg.seq))
            if isinstance(msg, Plan):
                run.plan = msg
            elif isinstance(msg, Failure):
                run.failures.append(msg.text)

    def _check(self) -> None:
        """Raise once for each failure the worker reported, and once when it ended (it restarts with
        the next scan, :data:`MAX_RESTARTS` times at most; after that every step raises)."""
        self._receive()
        run = self._run
        if run is None:
            if self.restarts > MAX_RESTARTS:
                raise RuntimeError(f"the scan map worker ended {self.restarts} times; not started again")
            return
        if run.failures:
            text, run.failures = run.failures[-1], []
            raise RuntimeError(f"scan map worker: {text}")
        if run.link.ended:
            run.finalizer()
            code = run.proc.poll()
            self._run = None
            self.restarts += 1
            self._forget()
            again = "; starting it again with an empty map" if self.restarts <= MAX_RESTARTS else ""
            raise RuntimeError(f"the scan map worker ended (exit code {code}){again}")

    def _submit(self, scan: Any, pose: np.ndarray, goal: tuple[float, float], now: float) -> None:
        self._seq += 1
        self._pending = Job(
            seq=self._seq,
            generation=self._generation,
            ranges=np.asarray(scan.ranges, dtype=np.float64).reshape(-1),
            angle_min=float(scan.angle_min),
            angle_increment=float(scan.angle_increment),
            range_min=float(scan.range_min),
            range_max=float(scan.range_max),
            pose=np.array(pose[:3], dtype=np.float64),
            goal=np.asarray(goal, dtype=np.float64),
            now=float(now),
            path_id=self.path_id,
            progress=self.progress,
            remaining=self.remaining,
            odometer=self.odometer,
            mount=getattr(scan, "mount", None),
        )

    def _flush(self) -> None:
        """Send the waiting scan when fewer than :data:`IN_FLIGHT` are unanswered."""
        if self._pending is None:
            return
        self.start()
        self._receive()
        run = self._run
        assert run is not None
        acked = run.acked
        unanswered = sum(1 for s in self._sent_at if s > acked)
        if unanswered >= IN_FLIGHT:
            return
        job, self._pending = self._pending, None
        self._sent_at = {s: t for s, t in self._sent_at.items() if s >= acked}  # the answered one: its age
        self._sent_at[job.seq] = time.perf_counter()
        self._send(("job", job))

    def _send(self, msg: tuple) -> None:
        if self._run is not None:
            self._run.link.send(msg)

    def _wait(self, seq: int) -> None:
        """Lockstep: wait until the worker answered scan ``seq`` (or ended)."""
        run = self._run
        if run is None:
            return
        deadline = time.monotonic() + LOCKSTEP_TIMEOUT
        self._receive()
        while run.acked < seq and not run.link.ended:
            if time.monotonic() > deadline:
                raise RuntimeError(f"scan map worker: no answer to scan {seq} within {LOCKSTEP_TIMEOUT} s")
            run.link.wait(deadline - time.monotonic())
            self._receive()
        self._check()

    def _take(self) -> None:
        """Take the newest plan of this goal that came back."""
        self._receive()
        run = self._run
        if run is None or run.plan is None:
            return
        plan, run.plan = run.plan, None
        if plan.generation != self._generation:
            return
        sent = self._sent_at.get(plan.seq)
        if sent is not None:
            self.timings.append((time.perf_counter() - sent, plan.busy_s))
        if plan.path_id != self.path_id:
            self.path, self.path_id = plan.path, plan.path_id
            self.progress, self.remaining = plan.progress, plan.remaining
            self._catch_up(plan)
        self.path_radius, self.failed, self.plans = plan.path_radius, plan.failed, plan.plans
        self.retreating = plan.retreating
        self._sight, self._sight_rule = plan.sight, plan.sight_rule
