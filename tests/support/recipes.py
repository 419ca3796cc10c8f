"""The two-stage recipe "tiny" of the recipe tests (navtrain.recipe's format): conf/nav.yaml, a
first stage and a second that lowers the PPO KL target, 16 CPU / 64 CUDA worlds each, out/tiny. The
numbers of a test's run (seed, iterations, episodes) are the caller's."""

from __future__ import annotations

from typing import Any


def tiny_recipe(
    *,
    seed: int,
    first_iterations: int,
    every: int,
    validation_episodes: int,
    episodes: int,
    suite_episodes: int | None = None,
) -> dict[str, Any]:
    """The recipe as its YAML data (key order as written); ``suite_episodes`` adds the robustness,
    families and compare suites of that many episodes each."""
    recipe: dict[str, Any] = {
        "name": "tiny",
        "config": "conf/nav.yaml",
        "seed": seed,
        "stages": [
            {"name": "first", "iterations": first_iterations, "num_envs": {"cpu": 16, "cuda": 64}},
            {
                "name": "second",
                "iterations": 20,
                "num_envs": {"cpu": 16, "cuda": 64},
                "overrides": ["algorithm.desired_kl=0.005"],
            },
        ],
        "selection": {"every": every, "validation_episodes": validation_episodes, "validation_seed": 2000003},
        "evaluation": {"episodes": episodes},
    }
    if suite_episodes is not None:
        recipe["suites"] = {
            "robustness": {"episodes": suite_episodes},
            "families": {"episodes": suite_episodes},
            "compare": {"episodes": suite_episodes},
        }
    recipe["out"] = "out/tiny"
    return recipe
