"""The recorder's relay, driven without DDS: a scripted simulator feeds its buffers as the executor would.

Checked here: a tick the simulator published again (lockstep resend) after the relay had taken it is
relayed once, whichever of the two copies of its best-effort scan arrived.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

pytest.importorskip("rclpy")

from geometry_msgs.msg import PoseStamped, Twist  # noqa: E402
from nav_msgs.msg import Odometry  # noqa: E402
from rclpy.serialization import serialize_message  # noqa: E402
from rosgraph_msgs.msg import Clock  # noqa: E402
from sensor_msgs.msg import LaserScan  # noqa: E402
from std_msgs.msg import String  # noqa: E402

from navbags.bagio import CLOCK, CMD, GOAL, ODOM, SCAN  # noqa: E402
from navbags.record import FaultPlan, _Recorder  # noqa: E402
from navbags.reference import NodeParams  # noqa: E402
from navbags.rosproc import Timeout  # noqa: E402

T0 = 1_000_000_000
DT = 100_000_000


def _stamped(msg, t_ns: int) -> bytes:
    msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(t_ns, 1_000_000_000)
    return serialize_message(msg)


def _clock(t_ns: int) -> bytes:
    c = Clock()
    c.clock.sec, c.clock.nanosec = divmod(t_ns, 1_000_000_000)
    return serialize_message(c)


class _Pub:
    def __init__(self, on_publish: Callable[[bytes], None] | None = None) -> None:
        self.sent: list[bytes] = []
        self.on_publish = on_publish

    def publish(self, raw: bytes) -> None:
        self.sent.append(raw)
        if self.on_publish:
            self.on_publish(raw)


class _FakeRelay:
    """The relay's buffers and publishers; a clock sent to the node is answered at once."""

    def __init__(self) -> None:
        self.episodes: list[bytes] = []
        self.goals: list[bytes] = []
        self.scans: list[bytes] = []
        self.odoms: list[bytes] = []
        self.clocks: list[bytes] = []
        self.cmds: list[bytes] = []
        self.status: list[bytes] = []
        self.types = {"scan": LaserScan, "odom": Odometry, "goal": PoseStamped, "clock": Clock, "str": String}
        self.pubs = {SCAN: _Pub(), ODOM: _Pub(), GOAL: _Pub(), CLOCK: _Pub(self._answer)}
        self.fault_pub = _Pub()

    def _answer(self, _clock_raw: bytes) -> None:
        self.cmds.append(serialize_message(Twist()))
        self.status.append(serialize_message(String(data="{}")))


class _ScriptedRos:
    """``spin_until`` delivers the next scripted burst of simulator messages while ``cond`` is false."""

    def __init__(self, bursts: list[Callable[[], None]]) -> None:
        self.bursts = list(bursts)
        self.watch: list = []

    def spin_until(self, cond, timeout, what, procs=None) -> None:
        while not cond():
            if not self.bursts:
                raise Timeout(f"timed out waiting for {what}")
            self.bursts.pop(0)()


class _Proc:
    def __init__(self) -> None:
        self.live = True

    def alive(self) -> bool:
        return self.live

    def output(self) -> str:
        return ""


def test_a_tick_sent_again_after_its_first_scan_was_lost_is_relayed_once():
    """The CI failure pattern: the first scan of tick 0 is lost, the simulator sends the tick again,
    the relay takes the second scan; the resent clock that follows must not wait for a third."""
    relay, sim = _FakeRelay(), _Proc()

    def tick(t_ns: int, scan: bool = True) -> Callable[[], None]:
        def burst() -> None:
            if scan:
                relay.scans.append(_stamped(LaserScan(), t_ns))
            relay.odoms.append(_stamped(Odometry(), t_ns))
            relay.clocks.append(_clock(t_ns))

        return burst

    def finish() -> None:
        relay.episodes.append(serialize_message(String(data='{"outcome": "timeout"}')))
        sim.live = False

    # tick 0 with its scan lost, tick 0 again (lockstep resend), tick 1, the episode's end
    ros = _ScriptedRos([tick(T0, scan=False), tick(T0), tick(T0 + DT), finish])
    rec = _Recorder(ros, relay, FaultPlan(), NodeParams(), period=0.1, timeout=5.0)
    rec.run(_Proc(), sim, episodes=1)
    assert rec.ticks == 2 and rec.sim_resends == 1
    relayed = [bytes(c) for c in relay.pubs[CLOCK].sent]
    assert relayed == [_clock(T0), _clock(T0 + DT)]
    assert len(relay.pubs[SCAN].sent) == 2 and len(relay.pubs[ODOM].sent) == 2
    assert [t for t, _, _ in rec.rows].count(CMD) == 2
