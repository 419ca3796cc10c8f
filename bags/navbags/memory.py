"""The policy node's memory, and what it is spent on.

    nav-benchmark-memory                                  # default: tests/fixtures/bundle, 300 ticks
    nav-benchmark-memory --ticks 600 --json docs/results/node_memory.json
    python -m navbags.memory --bundle /path/to/bundle     # the same

Three measurements, printed as one JSON document (and written with ``--json``):

- ``node``: ``policy_node`` (the installed console script and ``config/policy.yaml``: the node's
  defaults, scan map on its worker process) started as its own process on simulated time and driven
  for ``--ticks`` control ticks toward a goal it never reaches, as :mod:`navbags.latency`'s clock mode
  drives it: then its resident memory (``VmRSS``, peak ``VmHWM`` from /proc), that of its child
  processes (the scan map's worker), and the node's resident memory by mapping (/proc/PID/smaps:
  each shared library, the Python heap and anonymous memory), largest first;
- ``imports``: a fresh interpreter importing what the node imports, one step at a time, with the
  resident memory after each step (what each costs), then the ONNX session of the bundle, and which
  heavy packages the node's import loaded (scipy is loaded only by the process that plans on the
  scan map, the DWA only with ``controller:=dwa``);
- ``python_heap``: tracemalloc's largest Python allocations after that import, by file.

Not a test: the numbers depend on the machine and its load; docs/results.md keeps the measured
ones with the date and the command. Linux only (/proc).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from navbags.rosproc import DomainLease, NodeProc, node_processes
from navdeploy.bench_cli import add_bundle_option

IMPORT_STEPS = (
    ("python", ""),
    ("numpy", "import numpy"),
    ("rclpy", "import rclpy, rclpy.node, rclpy.clock, rclpy.duration"),
    ("messages", "import geometry_msgs.msg, nav_msgs.msg, sensor_msgs.msg, std_msgs.msg, rcl_interfaces.msg"),
    ("onnxruntime", "import onnxruntime"),
    ("navcontract", "import navcontract.bundle, navcontract.scan, navcontract.spec, navcontract.guard"),
    ("navdeploy", "import navdeploy.runtime, navdeploy.gate, navdeploy.settings, navdeploy.node_params"),
    ("nav_policy.policy_node", "import nav_policy.policy_node"),
)
HEAVY = ("scipy", "torch", "mujoco", "warp", "yaml", "navdeploy.dwa", "navdeploy.scan_map")

_PROBE = """
import json, sys, tracemalloc
trace = sys.argv[4] == "trace"
if trace:
    tracemalloc.start(1)

def rss():
    for line in open('/proc/self/status'):
        if line.startswith('VmRSS'):
            return float(line.split()[1]) / 1024.0

steps = json.loads(sys.argv[1])
out = {"steps": []}
for name, code in steps:
    exec(code)
    out["steps"].append([name, round(rss(), 1)])
if trace:
    heap = tracemalloc.take_snapshot().statistics("filename")
    out["python_heap_mib"] = round(sum(s.size for s in heap) / 2**20, 1)
    out["python_heap_top"] = [[s.traceback[0].filename, round(s.size / 2**20, 2)] for s in heap[:12]]
    print(json.dumps(out))
    sys.exit(0)
from navdeploy.runtime import PolicyRuntime
PolicyRuntime.load(sys.argv[2])
out["steps"].append(["ONNX session (bundle loaded)", round(rss(), 1)])
heavy = json.loads(sys.argv[3])
out["loaded"] = {h: h in sys.modules for h in heavy}
print(json.dumps(out))
"""


def status_mib(pid: int) -> dict[str, float]:
    """``VmRSS`` and ``VmHWM`` of a process [MiB]."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, val = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = round(float(val.split()[0]) / 1024.0, 1)
    return out


def children(pid: int) -> list[int]:
    """The process ids whose parent is ``pid``."""
    kids = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text() if (task / "children").is_file() else ""
        kids += [int(k) for k in text.split()]
    return kids


def rss_by_mapping(pid: int, top: int = 15) -> list[tuple[str, float]]:
    """Resident memory [MiB] per mapped file of a process (a shared library by its file name; the
    Python heap ``[heap]``; anonymous mappings ``[anon]``), largest first, the rest summed."""
    sizes: dict[str, float] = {}
    name = "[anon]"
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        head = line.split()
        if head and "-" in head[0] and len(head) >= 5 and not head[0].endswith(":"):
            name = Path(head[5]).name if len(head) >= 6 else "[anon]"
        elif head and head[0] == "Rss:":
            sizes[name] = sizes.get(name, 0.0) + float(head[1]) / 1024.0
    ranked = sorted(sizes.items(), key=lambda kv: -kv[1])
    rest = sum(v for _, v in ranked[top:])
    return [(k, round(v, 1)) for k, v in ranked[:top]] + [("(the rest)", round(rest, 1))]


def import_steps(bundle: Path, trace: bool) -> dict:
    """The probe in a fresh interpreter: resident memory after each import step and the bundle's
    ONNX session, and which heavy packages got loaded; with ``trace``, tracemalloc's Python heap after
    the imports instead (tracemalloc's own bookkeeping inflates the resident memory, so the steps
    are measured without it)."""
    cmd = [sys.executable, "-c", _PROBE, json.dumps(IMPORT_STEPS), str(bundle), json.dumps(HEAVY)]
    proc = subprocess.run([*cmd, "trace" if trace else "plain"], capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise SystemExit(f"nav-benchmark-memory: the import probe failed: {proc.stderr.strip().splitlines()[-1:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def live_node(bundle: Path, ticks: int) -> dict:
    """``policy_node`` on simulated time driven for ``ticks`` ticks (:mod:`navbags.latency`'s clock mode);
    then its memory, its children's, and its memory by mapping."""
    from navbags import latency

    work = Path(tempfile.mkdtemp(prefix="nav_memory_"))
    lease = DomainLease()
    try:
        with node_processes() as procs:
            proc = NodeProc(latency.node_command(bundle, True, 0.1), lease.domain_id, work / "policy_node.log")
            procs.append(proc)
            link = latency._open_link(lease.domain_id, True, procs)
            started = status_mib(proc.pid)
            scan, odom, goal = latency._messages(72)
            link.goal_pub.publish(goal)
            args = argparse.Namespace(messages=ticks, warmup=20, beams=72)
            t0 = time.monotonic()
            lat, lost = latency.measure_clock(link, proc, scan, odom, np.random.default_rng(0), args)
            driven_s = time.monotonic() - t0
            states = {}
            for s in link.status:
                states[s["state"]] = states.get(s["state"], 0) + 1
            kids = {str(k): {**status_mib(k), "cmd": _cmdline(k)} for k in children(proc.pid)}
            out = {
                "after_start_mib": started,
                "after_driving_mib": status_mib(proc.pid),
                "children_mib": kids,
                "by_mapping_mib": rss_by_mapping(proc.pid),
                "ticks": len(lat),
                "unanswered_ticks": lost,
                "driven_s": round(driven_s, 1),
                "states": states,
                "latency_ms_p50": round(float(np.percentile(lat, 50)), 3),
            }
            link.ros.close()
    finally:
        lease.release()
    return out


def _cmdline(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()


def main(argv: list[str] | None = None) -> int:
    from navbags.latency import FIXTURE_BUNDLE, bundle_arg, print_results

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_bundle_option(ap, str(FIXTURE_BUNDLE))
    ap.add_argument("--ticks", type=int, default=300, help="control ticks to drive the node for")
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    a = ap.parse_args(argv)
    bundle = bundle_arg(a.bundle)
    imports, heap = import_steps(bundle, trace=False), import_steps(bundle, trace=True)
    node = live_node(bundle, a.ticks)
    results = {
        "date": datetime.date.today().isoformat(),
        "command": " ".join(["nav-benchmark-memory", *(argv if argv is not None else sys.argv[1:])]),
        "bundle": str(bundle),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "node": node,
        "imports": {"steps_rss_mib": imports["steps"], "loaded": imports["loaded"]},
        "python_heap": {"total_mib": heap["python_heap_mib"], "top_files_mib": heap["python_heap_top"]},
    }
    print_results(results, a.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
