"""The policy node and the bag replay's offline reference share one command gate.

Both drive ``navdeploy.gate.CommandGate`` through the same message adapters, so one
message sequence (the fixture bag ``faults_seed42``: dropped scans, NaN beams, delayed odometry, a
goal change) gives the same ticks in both, and the recorded commands exactly. A deliberate change
of one rule of that module (here: the stale-input watchdog switched off) shows both halves:

- the reference alone changed: it no longer reproduces the recording, and a live replay into the
  unchanged node fails its node-vs-offline comparison;
- the node changed the same way (the patch applied in its process before it starts): node and
  reference still agree command for command, since they run the same code, and both now differ
  from the recording, so the replay fails on the recorded comparison instead.

The rules themselves are carried by the gate's unit tests (tests/runtime/test_controller.py).
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from navbags.bagio import CMD, STATUS, decode, json_of, read_bag
from navbags.reference import NodeParams, ReferenceNode, compute_reference, load_runtime
from navbags.replay import replay_bag
from navdeploy.gate import CommandGate

REPO = Path(__file__).resolve().parents[2]
BAG = REPO / "tests" / "fixtures" / "bags" / "faults_seed42"
BUNDLE = REPO / "tests" / "fixtures" / "bundle"
RECORDED = NodeParams()  # the fixture was recorded with the node's defaults (scan map on, planned inline)

# The deliberate rule change, for this process (the reference) and for the node's process.
RULE_CHANGE = "lambda self, item, now: None"  # CommandGate._age_problem: nothing is ever stale
NODE_WITH_RULE_CHANGE = f"""
import sys

import navdeploy.gate

navdeploy.gate.CommandGate._age_problem = {RULE_CHANGE}

from nav_policy.policy_node import main

sys.exit(main())
"""


def _change_rule(monkeypatch) -> None:
    monkeypatch.setattr(CommandGate, "_age_problem", eval(RULE_CHANGE))


@pytest.fixture(scope="module")
def bag():
    messages, _ = read_bag(BAG)
    cmds = np.array([[decode(m).linear.x, decode(m).linear.y, decode(m).angular.z] for m in messages if m.topic == CMD])
    states = [json_of(m)["state"] for m in messages if m.topic == STATUS]
    assert {"stale_scan", "stale_odom"} <= set(states), "the fault bag exercises the watchdog"
    return messages, cmds, states


@pytest.fixture()
def runtime():
    return load_runtime(BUNDLE)


def test_reference_drives_the_controller_the_node_runs(runtime) -> None:
    node = ReferenceNode(runtime)
    assert type(node.gate) is CommandGate
    import nav_policy.policy_node as policy_node

    assert policy_node.CommandGate is CommandGate  # the node builds the very same class


def test_reference_matches_the_recording_exactly_and_a_changed_rule_does_not(bag, runtime, monkeypatch) -> None:
    messages, cmds, states = bag
    ref = compute_reference(messages, runtime, RECORDED)
    assert [t.state for t in ref.ticks] == states
    assert np.array_equal(np.array([t.cmd for t in ref.ticks]), cmds)  # bit for bit

    _change_rule(monkeypatch)
    changed = compute_reference(messages, load_runtime(BUNDLE), RECORDED)
    got = [t.state for t in changed.ticks]
    stale = [k for k, s in enumerate(states) if s.startswith("stale_")]
    assert stale and all(got[k] == "driving" for k in stale), [(k, got[k]) for k in stale]
    delta = np.abs(np.array([t.cmd for t in changed.ticks]) - cmds).max(axis=1)
    assert delta.max() > 0.1
    first = int(np.argmax(delta > 1e-4))
    assert first == stale[0] and np.all(delta[:first] == 0.0)  # nothing differs before the rule matters


@pytest.mark.ros
@pytest.mark.slow
def test_replay_fails_when_the_reference_rule_changes(bag, monkeypatch, tmp_path) -> None:
    _, cmds, states = bag
    _change_rule(monkeypatch)  # this process only: the node keeps the real rule
    rep = replay_bag(BAG, BUNDLE, log_dir=tmp_path)
    assert not rep.problems and not rep.ambiguous, rep.summary()
    assert rep.node_states == states and np.array_equal(rep.node_cmds, cmds)  # the node: as recorded
    assert rep.max_delta_offline > 0.1 and rep.offline_states != states
    assert not rep.ok()


@pytest.mark.ros
@pytest.mark.slow
def test_node_and_reference_change_together_and_replay_fails_on_the_recording(bag, monkeypatch, tmp_path) -> None:
    _, cmds, states = bag
    script = tmp_path / "policy_node_changed_rule.py"
    script.write_text(textwrap.dedent(NODE_WITH_RULE_CHANGE))
    _change_rule(monkeypatch)
    rep = replay_bag(BAG, BUNDLE, log_dir=tmp_path, node_command=[sys.executable, str(script)])
    assert not rep.problems and not rep.ambiguous, rep.summary()
    # node and reference run the same (changed) gate: identical, tick by tick
    assert rep.node_states == rep.offline_states and rep.max_delta_offline == 0.0, rep.summary()
    # ... and both left the recording where the watchdog used to stop the robot
    assert "stale_scan" not in rep.node_states and rep.node_states != states
    assert rep.max_delta_recorded > 0.1
    assert not rep.ok()
