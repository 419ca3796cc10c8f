"""Bad input to the training CLIs: one line on stderr naming the problem, exit code 2, no
traceback, and nothing expensive started (no worlds built, no run folder, no rollout).

Each case calls the console script's ``main(argv)`` in this process, from the repository root:
its exit code (returned, or argparse's ``SystemExit``), stdout and stderr are checked as a user
would see them. :func:`test_console_script_refuses_in_one_line` runs each console script itself
once in a subprocess (the script prints the same one line and exits 2). The checkpoints are made
here without training (:func:`fake_checkpoint`), so these tests are fast.
"""

from __future__ import annotations

import datetime
import hashlib
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from tensordict import TensorDict

from navsim.config_load import load_config, to_dict
from navsim.contract_objects import policy_spec
from navsim.observations import POLICY_GROUP
from navtrain import evaluate_cli, export_cli, train_cli
from navtrain.ppo_config import ACTOR_OBS_GROUPS, actor_cfg
from support.paths import FIXTURE_BUNDLE, REPO

BUILDING = "building the MuJoCo Warp worlds"


@dataclass
class Ran:
    """What a user sees of one command: exit code, stdout, stderr."""

    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def run_cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Callable[..., Ran]:
    """``run_cli(main, *args)``: a CLI's ``main`` on ``args`` in this process, from the repository
    root; an exception other than ``SystemExit`` (a traceback for the user) fails the test."""
    monkeypatch.chdir(REPO)

    def run(main: Callable[[list[str]], int], *args: str) -> Ran:
        capsys.readouterr()
        try:
            code = main(list(args))
        except SystemExit as exit_:
            code = exit_.code
        out, err = capsys.readouterr()
        return Ran(code, out, err)

    return run


def assert_one_line_error(proc: Ran | subprocess.CompletedProcess, tool: str, *words: str) -> str:
    """Exit 2, exactly one stderr line, starting with the tool, holding ``words``; no traceback."""
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-3000:])
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    (line,) = lines
    assert line.startswith(f"{tool}: "), line
    for word in words:
        assert word in line, (word, line)
    return line


def fake_checkpoint(path: Path, *overrides: str, hidden: list[int] | None = None) -> Path:
    """A checkpoint as NavRunner writes it (keys, stored config, an actor of the configured shape,
    a moved normaliser), made without training."""
    from rsl_rl.models import MLPModel

    cfg = load_config(overrides=list(overrides))
    if hidden is not None:
        cfg.model.actor_hidden_dims = hidden
    dim = policy_spec(cfg).obs_dim
    kwargs = {k: v for k, v in actor_cfg(cfg).items() if k != "class_name"}
    actor = MLPModel(
        TensorDict({POLICY_GROUP: torch.zeros(1, dim)}, batch_size=[1]), ACTOR_OBS_GROUPS, "actor", 3, **kwargs
    )
    state = actor.state_dict()
    state["obs_normalizer._mean"] = torch.full_like(state["obs_normalizer._mean"], 0.5)
    state["obs_normalizer.count"] = torch.tensor(100)
    ckpt = {
        "actor_state_dict": state,
        "critic_state_dict": {},
        "optimizer_state_dict": {},
        "iter": 3,
        "infos": {"nav_config": to_dict(cfg)},
    }
    torch.save(ckpt, path)
    return path


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return fake_checkpoint(tmp_path_factory.mktemp("ckpt") / "model_3.pt")


@pytest.fixture(scope="module")
def broken(tmp_path_factory: pytest.TempPathFactory, ckpt: Path) -> dict[str, Path]:
    """Files that are not usable checkpoints."""
    d = tmp_path_factory.mktemp("broken")
    (d / "text.pt").write_text("not a checkpoint\n")
    (d / "empty.pt").write_bytes(b"")
    data = ckpt.read_bytes()
    (d / "truncated.pt").write_bytes(data[: len(data) // 2])
    torch.save([1, 2, 3], d / "list.pt")
    torch.save({"weights": torch.zeros(2)}, d / "dict.pt")
    torch.save({"when": datetime.date(2026, 1, 1)}, d / "unsafe.pt")  # needs weights_only=False
    return {p.stem: p for p in d.iterdir()}


# ------------------------------------------------------------------------------------------------
# nav-train

TRAIN = train_cli.main


def train_args(log_root: Path, *extra: str) -> list[str]:
    return ["--device", "cpu", "--max-iterations", "2", "--num-envs", "8", f"runner.log_root={log_root}", *extra]


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["env.room.num_obstacles=[1,"], ["override 'env.room.num_obstacles=[1,'", "not valid YAML"]),
        (["algorithm.learning_rat=1e-4"], ["unknown key", "algorithm.learning_rat"]),
        (["algorithm.learning_rate=-1e-3"], ["algorithm.learning_rate", "> 0"]),
        (["env.num_envs=0", "--device", "cuda"], ["env.num_envs"]),
        (["--num-envs", "0"], ["--num-envs", ">= 1"]),
        (["--num-envs", "-4"], ["--num-envs", ">= 1"]),
        (["--max-iterations", "0"], ["--max-iterations 0", "--no-export"]),
        (["--config", "no/such.yaml"], ["config file not found", "no/such.yaml"]),
    ],
)
def test_train_bad_input_is_one_line(
    run_cli: Callable[..., Ran], tmp_path: Path, extra: list[str], words: list[str]
) -> None:
    proc = run_cli(TRAIN, *train_args(tmp_path, *extra))
    assert_one_line_error(proc, "nav-train", *words)
    assert BUILDING not in proc.stdout
    assert not (tmp_path / "nav").exists(), "no run folder for a run that never starts"


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("missing", ["--resume", "no such checkpoint"]),
        ("text", ["--resume", "not a torch checkpoint"]),
        ("empty", ["--resume", "not a torch checkpoint"]),
        ("truncated", ["--resume", "not a torch checkpoint"]),
        ("list", ["--resume", "not a training checkpoint"]),
        ("dict", ["--resume", "not a training checkpoint", "actor_state_dict"]),
        ("unsafe", ["--resume", "not a readable checkpoint", "weights_only", "datetime.date"]),
    ],
)
def test_train_refuses_an_unusable_resume_checkpoint_before_building_worlds(
    run_cli: Callable[..., Ran], tmp_path: Path, broken: dict[str, Path], name: str, words: list[str]
) -> None:
    path = broken.get(name, tmp_path / "missing.pt")
    proc = run_cli(TRAIN, *train_args(tmp_path, "--resume", str(path)))
    line = assert_one_line_error(proc, "nav-train", *words)
    assert "weights_only=False" not in line and "weights_only` set to `False" not in line
    assert BUILDING not in proc.stdout
    assert not (tmp_path / "nav").exists()


@pytest.mark.parametrize(
    ("override", "term"),
    [
        ("env.lidar.max_range=8", "max_range: checkpoint 6.0 vs config 8.0"),
        ("observations.policy.goal_polar.params.distance_scale=4.0", "term 'goal_polar' params"),
        ("observations.policy.action_prev.enabled=true", "term order/names"),
    ],
)
def test_resume_with_another_observation_meaning_is_refused_naming_the_term(
    run_cli: Callable[..., Ran], tmp_path: Path, ckpt: Path, override: str, term: str
) -> None:
    """Same width (max_range, a goal_polar scale) or not: the fingerprints differ, the term is named."""
    proc = run_cli(TRAIN, *train_args(tmp_path, "--resume", str(ckpt), override))
    assert_one_line_error(proc, "nav-train", "--resume", "observation spec", "fingerprint", term)
    assert BUILDING not in proc.stdout


def test_resume_with_another_actor_shape_is_refused(run_cli: Callable[..., Ran], tmp_path: Path, ckpt: Path) -> None:
    proc = run_cli(TRAIN, *train_args(tmp_path, "--resume", str(ckpt), "model.actor_hidden_dims=[32,32]"))
    assert_one_line_error(proc, "nav-train", "--resume", "does not fit the configured actor")
    assert BUILDING not in proc.stdout


def test_train_unwritable_log_root_is_one_line(run_cli: Callable[..., Ran], tmp_path: Path) -> None:
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    proc = run_cli(TRAIN, *train_args(blocker / "logs"))
    assert_one_line_error(proc, "nav-train", "cannot create the run folder")
    assert BUILDING not in proc.stdout


# ------------------------------------------------------------------------------------------------
# nav-evaluate

EVALUATE = evaluate_cli.main


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("missing", ["no such checkpoint"]),
        ("text", ["not a torch checkpoint"]),
        ("truncated", ["not a torch checkpoint"]),
        ("unsafe", ["not a readable checkpoint"]),
    ],
)
def test_evaluate_refuses_an_unusable_checkpoint(
    run_cli: Callable[..., Ran], tmp_path: Path, broken: dict[str, Path], name: str, words: list[str]
) -> None:
    path = broken.get(name, tmp_path / "missing.pt")
    proc = run_cli(EVALUATE, "--checkpoint", str(path), "--episodes", "4")
    assert_one_line_error(proc, "nav-evaluate", str(path.name), *words)


@pytest.mark.parametrize(
    ("override", "words"),
    [
        ("env.room.num_obstacles=[1,", ["override 'env.room.num_obstacles=[1,'", "not valid YAML"]),
        ("env.room.sizee=3", ["unknown key 'env.room.sizee'"]),
        ("env.lidar.max_range=8", ["change the policy observation", "max_range"]),
    ],
)
def test_evaluate_bad_override_is_one_line_before_any_world(
    run_cli: Callable[..., Ran], ckpt: Path, override: str, words: list[str]
) -> None:
    proc = run_cli(EVALUATE, "--checkpoint", str(ckpt), "--episodes", "4", override)
    assert_one_line_error(proc, "nav-evaluate", *words)
    assert "[evaluate]" not in proc.stdout


def test_evaluate_bad_counts_and_outputs(run_cli: Callable[..., Ran], tmp_path: Path, ckpt: Path) -> None:
    proc = run_cli(EVALUATE, "--checkpoint", str(ckpt), "--episodes", "0")
    assert_one_line_error(proc, "nav-evaluate", "--episodes", ">= 1")
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    proc = run_cli(EVALUATE, "--checkpoint", str(ckpt), "--episodes", "4", "--json", str(blocker / "m.json"))
    assert_one_line_error(proc, "nav-evaluate", "--json", "is not a folder")


def test_evaluate_bundle_with_invalid_contract_json(run_cli: Callable[..., Ran], tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    shutil.copytree(FIXTURE_BUNDLE, bundle)
    (bundle / "contract.json").write_text('{"format": "nav_policy.bundle",\n  oops\n')
    proc = run_cli(EVALUATE, "--bundle", str(bundle), "--episodes", "4")
    assert_one_line_error(proc, "nav-evaluate", "contract.json", "not valid JSON", "line 2")


# ------------------------------------------------------------------------------------------------
# nav-export: the output folder is checked before the rollout

EXPORT = export_cli.main


def digests(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def test_export_refuses_to_replace_a_different_bundle_without_force(
    run_cli: Callable[..., Ran], tmp_path: Path, ckpt: Path
) -> None:
    out = tmp_path / "bundle"
    shutil.copytree(FIXTURE_BUNDLE, out)
    before = digests(out)
    proc = run_cli(EXPORT, "--checkpoint", str(ckpt), "--out", str(out), "--device", "cpu")
    assert_one_line_error(proc, "nav-export", "different bundle", "--force")
    assert digests(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bundle"], "no staging folder left behind"


def test_export_refuses_a_folder_with_other_files_even_with_force(
    run_cli: Callable[..., Ran], tmp_path: Path, ckpt: Path
) -> None:
    out = tmp_path / "home"
    out.mkdir()
    (out / "notes.txt").write_text("mine\n")
    proc = run_cli(EXPORT, "--checkpoint", str(ckpt), "--out", str(out), "--force", "--device", "cpu")
    assert_one_line_error(proc, "nav-export", "not part of a bundle", "notes.txt")
    assert (out / "notes.txt").read_text() == "mine\n"


def test_export_existing_invalid_contract_json_is_one_line(
    run_cli: Callable[..., Ran], tmp_path: Path, ckpt: Path
) -> None:
    out = tmp_path / "bundle"
    shutil.copytree(FIXTURE_BUNDLE, out)
    (out / "contract.json").write_text("{oops")
    proc = run_cli(EXPORT, "--checkpoint", str(ckpt), "--out", str(out), "--device", "cpu")
    assert_one_line_error(proc, "nav-export", "contract.json", "not valid JSON", "--force")


def test_export_unwritable_out_and_bad_checkpoint_are_one_line(
    run_cli: Callable[..., Ran], tmp_path: Path, ckpt: Path, broken
) -> None:
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    proc = run_cli(EXPORT, "--checkpoint", str(ckpt), "--out", str(blocker / "bundle"), "--device", "cpu")
    assert_one_line_error(proc, "nav-export", "is not a folder")
    proc = run_cli(EXPORT, "--checkpoint", str(broken["text"]), "--out", str(tmp_path / "b"), "--device", "cpu")
    assert_one_line_error(proc, "nav-export", "not a torch checkpoint")
    proc = run_cli(EXPORT, "--checkpoint", str(ckpt), "--out", str(tmp_path / "b"), "--tol", "-1")
    assert_one_line_error(proc, "nav-export", "--tol")
    assert not (tmp_path / "b").exists()


@pytest.mark.skipif(
    not hasattr(__import__("os"), "geteuid") or __import__("os").geteuid() == 0, reason="root ignores modes"
)
def test_export_read_only_parent_is_one_line(run_cli: Callable[..., Ran], tmp_path: Path, ckpt: Path) -> None:
    parent = tmp_path / "ro"
    parent.mkdir()
    parent.chmod(0o555)
    try:
        proc = run_cli(EXPORT, "--checkpoint", str(ckpt), "--out", str(parent / "bundle"), "--device", "cpu")
    finally:
        parent.chmod(0o755)
    assert_one_line_error(proc, "nav-export", "not writable")


# ------------------------------------------------------------------------------------------------
# The console scripts themselves, as a user starts them


@pytest.mark.slow
@pytest.mark.parametrize(
    ("tool", "args", "words"),
    [
        ("nav-train", ["algorithm.learning_rat=1e-4"], ["unknown key", "algorithm.learning_rat"]),
        ("nav-evaluate", ["--checkpoint", "{text}", "--episodes", "4"], ["text.pt", "not a torch checkpoint"]),
        ("nav-export", ["--checkpoint", "{text}", "--out", "{tmp}/b", "--device", "cpu"], ["not a torch checkpoint"]),
    ],
)
def test_console_script_refuses_in_one_line(
    tmp_path: Path, broken: dict[str, Path], tool: str, args: list[str], words: list[str]
) -> None:
    """The installed script prints the one line of its ``main`` and exits 2: nothing is built,
    no run folder or bundle folder is made."""
    script = Path(sys.executable).with_name(tool)
    assert script.is_file(), "pip install --no-deps -e training"
    args = [a.format(text=broken["text"], tmp=tmp_path) for a in args]
    if tool == "nav-train":
        args = train_args(tmp_path, *args)
    proc = subprocess.run([str(script), *args], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert_one_line_error(proc, tool, *words)
    assert BUILDING not in proc.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == [], "nothing written"
