"""navtrain.runner.ThreadPhases: collection on one torch thread, the update on the thread count
measured fastest (1 or all), re-measured now and then."""

from __future__ import annotations

import torch

from navtrain.runner import ThreadPhases


def test_collection_runs_on_one_thread_and_restores_the_setting() -> None:
    before = torch.get_num_threads()
    phases = ThreadPhases(1, (1, 2), active=True)
    with phases.collection():
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before


def test_update_threads_are_timed_then_the_faster_is_kept_and_the_other_retimed() -> None:
    phases = ThreadPhases(1, (1, 2), active=True, reprobe=5)
    assert phases.next_update_threads() == 2  # warm-up update, not timed
    phases.updates = 1
    assert phases.next_update_threads() == 1  # each candidate once
    phases.seconds[1] = 1.0
    phases.updates = 2
    assert phases.next_update_threads() == 2
    phases.seconds[2] = 0.6
    for k in range(3, 12):
        phases.updates = k
        want = 1 if k % 5 == 0 else 2  # the other one again every 5 updates
        assert phases.next_update_threads() == want, k
    phases.seconds[2] = 1.8  # the machine got busy: 2 threads measured slower now
    phases.updates = 12
    assert phases.next_update_threads() == 1


def test_the_update_context_times_and_chooses(capsys) -> None:
    before = torch.get_num_threads()
    phases = ThreadPhases(1, (1, 2), active=True)
    seen = []
    for _ in range(3):
        with phases.update():
            seen.append(torch.get_num_threads())
    assert seen == [2, 1, 2] and set(phases.seconds) == {1, 2}
    assert phases.chosen in (1, 2) and "PPO update on" in capsys.readouterr().out
    assert torch.get_num_threads() == before


def test_inactive_on_cuda_leaves_torch_alone() -> None:
    phases = ThreadPhases.for_device("cuda")
    before = torch.get_num_threads()
    with phases.update(), phases.collection():
        assert torch.get_num_threads() == before
