"""Draw the data flow of nav_policy into docs/architecture.png.

Run: .venv/bin/python docs/architecture.py
"""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch  # noqa: E402

OUT = Path(__file__).with_suffix(".png")
TRAIN, ROBOT, SHARED, SIDE = "#dbe8f6", "#e3f2df", "#fff1c9", "#eeeeee"

# name: (x centre, y centre, width, height, colour, title, detail)
BOXES = {
    "conf": (1.2, 5.6, 1.7, 0.9, TRAIN, "conf/nav.yaml", "the one config"),
    "navsim": (4.0, 5.6, 2.6, 0.9, TRAIN, "navsim", "MuJoCo Warp worlds,\nlidar, terms"),
    "navtrain": (7.1, 5.6, 2.4, 0.9, TRAIN, "navtrain", "PPO (rsl_rl),\nevaluation"),
    "ckpt": (9.8, 5.6, 1.9, 0.9, TRAIN, "checkpoint", "model_<it>.pt"),
    "export": (12.3, 5.6, 1.9, 0.9, TRAIN, "nav-export", "ONNX + self-check"),
    "contract": (
        7.1,
        3.55,
        6.4,
        1.0,
        SHARED,
        "navcontract  (contract/, numpy: the seam)",
        "terms, spec, scan rule, action, guard, path rule, response, bundle",
    ),
    "bundle": (12.3, 1.5, 2.3, 1.0, ROBOT, "bundle", "policy.onnx\n+ contract.json"),
    "navdeploy": (
        8.3,
        1.5,
        3.6,
        1.0,
        ROBOT,
        "navdeploy runtime",
        "PolicyRuntime; command gate:\nsmoother, then guard (last); scan map, DWA",
    ),
    "node": (4.0, 1.5, 2.9, 1.0, ROBOT, "nav_policy ROS 2 node", "/scan, /odom, /goal_pose\n-> /cmd_vel"),
    "sim": (1.0, 2.55, 1.7, 0.8, SIDE, "nav_policy_sim", "sim node (navsim)"),
    "bags": (1.0, 0.7, 1.7, 0.8, SIDE, "navbags", "record / replay"),
}

# (from, to, style): solid = data flows, dashed = imports the contract
ARROWS = [
    ("conf", "navsim", "-"),
    ("navsim", "navtrain", "-"),
    ("navtrain", "ckpt", "-"),
    ("ckpt", "export", "-"),
    ("export", "bundle", "-"),
    ("bundle", "navdeploy", "-"),
    ("navdeploy", "node", "-"),
    ("sim", "node", "-"),
    ("bags", "node", "-"),
    ("contract", "navsim", "--"),
    ("contract", "navtrain", "--"),
    ("contract", "export", "--"),
    ("contract", "navdeploy", "--"),
    ("contract", "bundle", "--"),
]


def anchor(name, toward):
    """The point on box `name`'s border facing box `toward` (side or top/bottom)."""
    x, y, w, h = BOXES[name][:4]
    tx, ty = BOXES[toward][:2]
    dx, dy = tx - x, ty - y
    if abs(dy) * w > abs(dx) * h:  # leaves through the top or the bottom
        return x + dx * (h / 2) / abs(dy) * 0.4, y + h / 2 * (1 if dy > 0 else -1)
    return x + w / 2 * (1 if dx > 0 else -1), y + dy * (w / 2) / abs(dx) * 0.4


def main():
    fig, ax = plt.subplots(figsize=(14, 7.2))
    ax.set_xlim(-0.1, 13.6)
    ax.set_ylim(-0.1, 6.9)
    ax.axis("off")
    ax.text(0.1, 6.55, "training machine: torch, MuJoCo Warp  (training/)", fontsize=11, color="#2a5a8a")
    ax.text(
        0.1,
        0.0,
        "robot: numpy, onnxruntime, rclpy, no torch  (deploy/, ros2_ws/src/nav_policy)",
        fontsize=11,
        color="#2f6b2a",
    )
    for x, y, w, h, colour, title, detail in BOXES.values():
        ax.add_patch(
            FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.04", fc=colour, ec="#555555", lw=1.2)
        )
        ax.text(x, y + h / 2 - 0.2, title, ha="center", va="center", fontsize=11, weight="bold")
        ax.text(x, y - 0.1, detail, ha="center", va="center", fontsize=9, linespacing=1.15)
    for a, b, style in ARROWS:
        ax.add_patch(
            FancyArrowPatch(
                anchor(a, b),
                anchor(b, a),
                arrowstyle="-|>",
                mutation_scale=16,
                linestyle=style,
                lw=1.4,
                color="#333333" if style == "-" else "#b07d00",
            )
        )
    ax.text(13.55, 6.55, "solid: data    dashed: uses the contract", ha="right", fontsize=9)
    fig.savefig(OUT, dpi=110, bbox_inches="tight")


if __name__ == "__main__":
    main()
