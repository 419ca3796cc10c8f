"""The tree's seams, read from the code's own imports (no module is imported here).

- Every distribution's import graph (module-level and function-level imports alike) has no cycle.
- Distributions depend only downwards: the contract on nothing of the project; the robot runtime
  on the contract; the ROS robot package on both; the training side on the contract and the
  runtime; the bag tools and the simulation package on what they drive.
- No module of the contract, the robot runtime or the robot's ROS package imports the training
  side (or torch), nor reads a training-config key: a section name of the training config used as a
  mapping key, or a dotted key such as ``"env.lidar.num_beams"`` in a string.
- No function outside the Warp kernels is longer than :data:`MAX_FUNCTION_LINES`.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from support.paths import REPO

DISTRIBUTIONS: dict[str, list[Path]] = {
    "navcontract": [REPO / "contract" / "navcontract"],
    "navdeploy": [REPO / "deploy" / "navdeploy"],
    "nav_policy": [REPO / "ros2_ws" / "src" / "nav_policy" / "nav_policy"],
    "training": [REPO / "training" / "navsim", REPO / "training" / "navtrain"],
    "navbags": [REPO / "bags" / "navbags"],
    "nav_policy_sim": [REPO / "ros2_ws" / "src" / "nav_policy_sim" / "nav_policy_sim"],
}
"""Each distribution's packages (the training distribution ships two)."""

ALLOWED = {
    "navcontract": set(),
    "navdeploy": {"navcontract"},
    "nav_policy": {"navcontract", "navdeploy"},
    "navsim": {"navcontract", "navdeploy"},
    "navtrain": {"navcontract", "navdeploy", "navsim"},
    "navbags": {"navcontract", "navdeploy", "nav_policy"},
    "nav_policy_sim": {"navcontract", "navdeploy", "nav_policy", "navsim"},
}
"""The project packages each package may import besides itself."""

ROBOT_SIDE = ("navcontract", "navdeploy", "nav_policy")
TRAINING_ONLY = {"torch", "warp", "mujoco", "mujoco_warp", "rsl_rl", "tensordict", "onnx", "matplotlib"}
MAX_FUNCTION_LINES = 80
LAUNCH_FILES = sorted((REPO / "ros2_ws" / "src" / "nav_policy" / "launch").glob("*.py"))


def package_files(root: Path) -> dict[str, Path]:
    """``{dotted module name: file}`` of a package folder."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        if "egg-info" in str(path) or "__pycache__" in path.parts:
            continue
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def imports_of(path: Path, module: str) -> set[str]:
    """Every module named by an import anywhere in ``path`` (relative imports resolved)."""
    found: set[str] = set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
            found |= {f"{base}.{alias.name}" for alias in node.names}
    return found


def all_modules() -> dict[str, tuple[str, Path]]:
    """``{module: (distribution, file)}`` over the whole project."""
    out = {}
    for dist, roots in DISTRIBUTIONS.items():
        for root in roots:
            out |= {name: (dist, path) for name, path in package_files(root).items()}
    return out


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a list of nodes, or None (iterative depth-first search)."""
    colour = dict.fromkeys(graph, 0)  # 0 unseen, 1 on the stack, 2 done
    for start in graph:
        if colour[start]:
            continue
        stack = [(start, iter(sorted(graph[start])))]
        colour[start] = 1
        while stack:
            node, edges = stack[-1]
            nxt = next(edges, None)
            if nxt is None:
                colour[node] = 2
                stack.pop()
            elif colour[nxt] == 1:
                path = [n for n, _ in stack]
                return path[path.index(nxt) :] + [nxt]
            elif colour[nxt] == 0:
                colour[nxt] = 1
                stack.append((nxt, iter(sorted(graph[nxt]))))
    return None


def test_no_distribution_has_an_import_cycle() -> None:
    modules = all_modules()
    graph = {name: set() for name in modules}
    for name, (dist, path) in modules.items():
        for target in imports_of(path, name):
            if target in modules and target != name and modules[target][0] == dist:
                graph[name].add(target)
    assert find_cycle(graph) is None, f"import cycle: {' -> '.join(find_cycle(graph) or [])}"


def test_a_cycle_is_found_when_there_is_one() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_packages_import_only_downwards() -> None:
    modules = all_modules()
    bad = {}
    for name, (_, path) in modules.items():
        own = name.split(".")[0]
        project = {t.split(".")[0] for t in imports_of(path, name)} & set(ALLOWED)
        extra = project - ALLOWED[own] - {own}
        if own in ROBOT_SIDE:
            extra |= {t.split(".")[0] for t in imports_of(path, name)} & TRAINING_ONLY
        if extra:
            bad[name] = sorted(extra)
    for path in LAUNCH_FILES:
        extra = {t.split(".")[0] for t in imports_of(path, path.stem)} & (TRAINING_ONLY | {"navsim", "navtrain"})
        if extra:
            bad[str(path.relative_to(REPO))] = sorted(extra)
    assert not bad, f"imports against the layout: {bad}"


def training_config_sections() -> set[str]:
    """The top-level section names of the training config (the fields of ``NavConfig``)."""
    tree = ast.parse((REPO / "training" / "navsim" / "config.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "NavConfig":
            return {s.target.id for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}
    raise AssertionError("training/navsim/config.py defines no NavConfig")


def docstring_nodes(tree: ast.AST) -> set[int]:
    """ids of the string constants that are docstrings (module, class, function, attribute)."""
    out = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            continue
        for stmt in body:
            if (
                isinstance(stmt, ast.Expr)
                and isinstance(stmt.value, ast.Constant)
                and isinstance(stmt.value.value, str)
            ):
                out.add(id(stmt.value))
    return out


def config_key_reads(path: Path, sections: set[str]) -> list[str]:
    """Where ``path`` reads a training-config key: a section name as a subscript or ``.get`` key,
    or a string starting with ``<section>.`` followed by a name."""
    tree = ast.parse(path.read_text(), filename=str(path))
    docs = docstring_nodes(tree)
    hits = []
    for node in ast.walk(tree):
        key = None
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            key = node.slice.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            if node.args and isinstance(node.args[0], ast.Constant):
                key = node.args[0].value
        if isinstance(key, str) and key in sections:
            hits.append(f"line {node.lineno}: key '{key}'")
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            head, dot, rest = node.value.partition(".")
            if dot and head in sections and rest[:1].isalpha() and " " not in node.value.split(".")[1]:
                hits.append(f"line {node.lineno}: '{node.value}'")
    return hits


def test_robot_side_reads_no_training_config_key() -> None:
    sections = training_config_sections()
    assert {"env", "randomization", "observations", "rewards"} <= sections
    bad = {}
    for name, (_, path) in all_modules().items():
        if name.split(".")[0] in ROBOT_SIDE and (hits := config_key_reads(path, sections)):
            bad[name] = hits
    assert not bad, f"robot-side modules read training-config keys: {bad}"


def test_the_config_key_check_sees_both_forms(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        '"""env.lidar.num_beams in a docstring is fine."""\nx = data["env"]["lidar"]\ny = "env.robot.v_max"\n'
    )
    assert sorted(config_key_reads(probe, {"env"})) == ["line 2: key 'env'", "line 3: 'env.robot.v_max'"]


def long_functions(path: Path) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        if any("wp." in ast.unparse(d) for d in node.decorator_list):
            continue  # Warp kernels and functions: one GPU/CPU kernel each, long by nature
        lines = node.end_lineno - node.lineno + 1
        if lines > MAX_FUNCTION_LINES:
            out.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name} ({lines} lines)")
    return out


@pytest.mark.parametrize("dist", sorted(DISTRIBUTIONS))
def test_no_function_is_longer_than_the_limit(dist: str) -> None:
    files = [p for root in DISTRIBUTIONS[dist] for p in package_files(root).values()]
    if dist == "nav_policy":
        files += LAUNCH_FILES
    long = [hit for path in files for hit in long_functions(path)]
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines: {long}"
