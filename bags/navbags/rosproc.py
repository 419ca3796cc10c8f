"""Node processes and DDS settings: loopback only, one private domain per run.

The one implementation of these for everything that starts ROS 2 nodes from Python: recording and
replay, the latency benchmark, and the ROS tests (tests/support/ros.py re-exports them).

- :func:`loopback_env` keeps Fast DDS on 127.0.0.1 (UDPv4 transport bound to loopback, built-in
  transports and shared memory off, ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST``).
- :class:`DomainLease` holds a ``ROS_DOMAIN_ID`` exclusively among the processes of this machine.
- :class:`NodeProc` runs a node (a console script of ``nav_policy`` / ``nav_policy_sim``) with its
  log in a file; ``stop()`` sends SIGTERM, then SIGKILL to the process group it created;
  :func:`node_processes` stops every one put in it, whatever happens.
- :class:`RosSide` is this process's own rclpy context / node / executor on that domain, with
  ``spin_until`` that waits on conditions (discovery counts, messages), never on sleeps, and fails
  early with the logs of a watched node process that died.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

LOCK_DIR = Path(tempfile.gettempdir()) / "nav_policy_ros_domains"  # shared with the ROS tests' leases

_FASTDDS_XML = """<?xml version="1.0" encoding="UTF-8" ?>
<dds xmlns="http://www.eprosima.com">
  <profiles>
    <transport_descriptors>
      <transport_descriptor>
        <transport_id>navbags_udp_loopback</transport_id>
        <type>UDPv4</type>
        <interfaceWhiteList><address>127.0.0.1</address></interfaceWhiteList>
      </transport_descriptor>
    </transport_descriptors>
    <participant profile_name="navbags_loopback" is_default_profile="true">
      <rtps>
        <userTransports><transport_id>navbags_udp_loopback</transport_id></userTransports>
        <useBuiltinTransports>false</useBuiltinTransports>
      </rtps>
    </participant>
  </profiles>
</dds>
"""


def loopback_env() -> dict[str, str]:
    LOCK_DIR.mkdir(parents=True, exist_ok=True)
    path = LOCK_DIR / "navbags_fastdds_loopback.xml"
    if not path.is_file() or path.read_text() != _FASTDDS_XML:
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(_FASTDDS_XML)
        tmp.replace(path)
    return {
        "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST",
        "FASTDDS_DEFAULT_PROFILES_FILE": str(path),
        "RMW_IMPLEMENTATION": "rmw_fastrtps_cpp",
    }


def use_loopback_here() -> None:
    """Apply the loopback settings to this process (before its first rclpy context)."""
    os.environ.update(loopback_env())
    os.environ.pop("ROS_LOCALHOST_ONLY", None)


class DomainLease:
    """A ROS_DOMAIN_ID no other process of this machine holds (file lock per id) until release()."""

    def __init__(self, lo: int = 20, hi: int = 200) -> None:
        LOCK_DIR.mkdir(parents=True, exist_ok=True)
        ids = list(range(lo, hi))
        random.SystemRandom().shuffle(ids)
        self._file = None
        for d in ids:
            f = open(LOCK_DIR / f"domain_{d}.lock", "w")  # noqa: SIM115 - held until release()
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                f.close()
                continue
            self.domain_id, self._file = d, f
            return
        raise RuntimeError(f"no free ROS_DOMAIN_ID in [{lo}, {hi})")

    def release(self) -> None:
        if self._file is not None:
            fcntl.flock(self._file, fcntl.LOCK_UN)
            self._file.close()
            self._file = None

    def __enter__(self) -> DomainLease:
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def node_env(domain_id: int, extra: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment for a node: loopback DDS, its own domain, unbuffered output."""
    env = dict(os.environ)
    env.update(loopback_env())
    env.pop("ROS_LOCALHOST_ONLY", None)
    env["ROS_DOMAIN_ID"] = str(domain_id)
    env["PYTHONUNBUFFERED"] = "1"
    env["RCUTILS_COLORIZED_OUTPUT"] = "0"
    env.update(extra or {})
    return env


# The ROS package that provides each node executable (for the error message when one is missing).
NODE_PACKAGES = {"policy_node": "nav_policy", "sim_node": "nav_policy_sim"}


def console_script(name: str) -> str:
    """Path of a console script (``policy_node``, ``sim_node``) next to this Python, or on PATH."""
    here = Path(sys.executable).parent / name
    if here.is_file():
        return str(here)
    found = shutil.which(name)
    if not found:
        pkg = NODE_PACKAGES.get(name, "nav_policy")
        raise FileNotFoundError(
            f"console script '{name}' not found: pip install --no-deps -e ros2_ws/src/{pkg} (scripts/setup.sh), "
            f"or source a colcon install that has {pkg}"
        )
    return found


def ros_args(params: dict[str, object], remaps: dict[str, str] | None = None) -> list[str]:
    out = ["--ros-args"]
    for k, v in params.items():
        if isinstance(v, bool):
            v = "true" if v else "false"
        out += ["-p", f"{k}:={v}"]
    for a, b in (remaps or {}).items():
        out += ["-r", f"{a}:={b}"]
    return out


class NodeProc:
    """A node process; output to ``log``; stop() = SIGTERM, then SIGKILL to its process group."""

    def __init__(
        self,
        cmd: Sequence[str],
        domain_id: int | None,
        log: Path,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        """Start ``cmd`` with ``env`` (default: :func:`node_env` of ``domain_id``)."""
        if env is None:
            if domain_id is None:
                raise ValueError("NodeProc needs a domain_id or an env")
            env = node_env(domain_id)
        self.cmd, self.log_path = list(cmd), Path(log)
        self._log = open(self.log_path, "w")  # noqa: SIM115 - closed in stop()
        self.popen = subprocess.Popen(
            self.cmd, env=env, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True, cwd=cwd
        )

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def name(self) -> str:
        return Path(self.cmd[0]).name

    def alive(self) -> bool:
        return self.popen.poll() is None

    def output(self) -> str:
        with contextlib.suppress(ValueError):
            self._log.flush()
        return self.log_path.read_text(errors="replace")

    def stop(self, timeout: float = 5.0) -> int:
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.popen.pid, signal.SIGKILL)  # the session this object created
                self.popen.wait(5)
        with contextlib.suppress(ValueError):
            self._log.close()
        return self.popen.returncode


@contextlib.contextmanager
def node_processes() -> Iterator[list[NodeProc]]:
    """A list to put NodeProcs in; all are stopped (SIGTERM -> SIGKILL) on exit, whatever happens."""
    procs: list[NodeProc] = []
    try:
        yield procs
    finally:
        for p in procs:
            p.stop()


class Timeout(RuntimeError):
    pass


class RosSide:
    """This process's rclpy context, node and executor on ``domain_id``."""

    def __init__(self, domain_id: int, name: str) -> None:
        use_loopback_here()
        import rclpy
        from rclpy.executors import SingleThreadedExecutor

        self.rclpy = rclpy
        self.context = rclpy.Context()
        rclpy.init(context=self.context, domain_id=domain_id)
        self.node = rclpy.create_node(name, context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.watch: list[NodeProc] = []

    def spin_until(
        self, cond: Callable[[], bool], timeout: float, what: str, procs: Sequence[NodeProc] | None = None
    ) -> None:
        """Spin until ``cond()``; raise :class:`Timeout` after ``timeout`` s, or RuntimeError as soon as
        a watched process (``procs``, default ``self.watch``) has exited, with their logs."""
        watch = list(self.watch if procs is None else procs)
        deadline = time.monotonic() + timeout
        while not cond():
            left = deadline - time.monotonic()
            if left <= 0:
                raise Timeout(f"timed out after {timeout} s waiting for {what}" + self._logs(watch))
            for p in watch:
                if not p.alive():
                    raise RuntimeError(
                        f"{p.name} exited ({p.popen.returncode}) while waiting for {what}" + self._logs(watch)
                    )
            self.executor.spin_once(timeout_sec=min(left, 0.05))

    def spin_for(self, seconds: float) -> None:
        """Process callbacks for a while (to collect messages over a known period)."""
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            self.executor.spin_once(timeout_sec=min(left, 0.05))

    @staticmethod
    def _logs(procs: Sequence[NodeProc]) -> str:
        return "".join(f"\n--- {p.name} (alive={p.alive()}):\n{p.output()[-3000:]}" for p in procs)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.executor.shutdown()
            self.node.destroy_node()
        with contextlib.suppress(Exception):
            self.rclpy.shutdown(context=self.context)
