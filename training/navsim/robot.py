"""The MJCF of the planar robot in its walled room, with a pool of obstacle slots.

The robot (SPEC §1): body ``base`` with slide joints ``jx``, ``jy`` and hinge ``jz``; a shell of
radius ``env.robot.radius`` (0.20) centred 0.15 above the floor; mass 1 kg with the inertia of a
disc of that radius; world-frame velocity actuators ``vx``, ``vy`` (kv 100, ctrl within the base's
largest speed limit, ±1.5, force ±200) and ``wz`` (kv 2, ctrl ±omega_max, ±2, force ±20).

Any base drives through the same actuators: the body-frame command ``[vx, vy, wz]`` is rotated into
them before every physics substep. A differential drive's command has ``vy = 0``, so the stiff
velocity actuators hold the body's sideways velocity near zero; what remains (the actuators' lag
behind a turning heading, contacts pushing the shell) is its wheel slip.

The shell is a *sphere*. Every obstacle and wall is a vertical prism (cylinder or box rotated
about z) spanning the floor to 1 m, so the sphere's distance to any of them is its distance in
the horizontal plane through its centre: exactly the distance of a vertical cylinder of the same
radius, the robot's footprint. The sphere gets there through MuJoCo's primitive sphere-box and
sphere-cylinder colliders instead of the general convex (GJK/EPA) collider that a cylinder shell
needs: on 2 CPU cores, MuJoCo Warp's physics at 512 worlds ran 24.7k env-steps/s against 16.5k
with the cylinder (nav-benchmark-sim, physics column, same run conditions).

Obstacles are static geoms of the world body, one per slot: cylinder slots and box slots with
sizes spread over the configured ranges. Each episode activates some slots and places them by
writing their world pose; unused slots are parked far below the floor. C MuJoCo (ROS 2 sim node,
reference benchmark) and MuJoCo Warp load the very same XML.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from navsim.config import EnvCfg
from navsim.families import active_families, extent_half, maze_edge_count, planned

ROBOT_HALF_HEIGHT = 0.15
LIDAR_HEIGHT = 0.15  # rays leave the robot centre at this height, horizontally
OBSTACLE_HALF_HEIGHT = 0.5
PARK_Z = -100.0  # inactive obstacle slots live here


@dataclass(frozen=True)
class SlotSizes:
    """Sizes of the obstacle pool: cylinder radii (Sc,) and box half sizes (Sb, 2), and which slots
    play which role (``roles``: role -> slot indices, cylinders first, then boxes):

    - ``room_cylinder``, ``room_box``: the rooms' obstacles (``env.room``), also used by arenas;
    - ``post``, ``piece``: clutter fields' posts and short wall pieces (``env.worlds.clutter``);
    - ``maze``: corridor wall segments, one per interior cell edge (``env.worlds.corridors``);
    - ``bound``: four long walls that close a world smaller than the fixed walls.
    Roles other than the rooms' exist only when a configured family needs them.
    """

    cylinder_radius: np.ndarray
    box_half: np.ndarray
    roles: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def num_slots(self) -> int:
        return len(self.cylinder_radius) + len(self.box_half)

    def bounding_radius(self) -> np.ndarray:
        """Radius of the circle around each slot's footprint (cylinders first, then boxes)."""
        return np.concatenate([self.cylinder_radius, np.linalg.norm(self.box_half, axis=1)])

    def role(self, name: str) -> np.ndarray:
        return self.roles.get(name, np.zeros(0, dtype=np.int64))


def slot_sizes(cfg: EnvCfg) -> SlotSizes:
    """Deterministic sizes spread over the configured ranges (part of the model, not the seed)."""
    r = cfg.room
    w = cfg.worlds
    fams = set(active_families(w))
    cyl = [np.linspace(r.cylinder_radius[0], r.cylinder_radius[1], r.num_cylinder_slots)]
    lo, hi = r.box_half_size
    n = r.num_box_slots
    # Pair short and long sides so the pool holds square blocks and elongated bars.
    a = np.linspace(lo, hi, n)
    boxes = [np.stack([a, np.roll(a, n // 3)], axis=1)]
    cyl_roles = [("room_cylinder", r.num_cylinder_slots)]
    box_roles = [("room_box", n)]
    if "clutter" in fams:
        c = w.clutter
        cyl.append(np.linspace(c.post_radius[0], c.post_radius[1], c.num_post_slots))
        cyl_roles.append(("post", c.num_post_slots))
        boxes.append(np.tile(np.asarray(c.piece_half, dtype=np.float64), (c.num_piece_slots, 1)))
        box_roles.append(("piece", c.num_piece_slots))
    if "corridors" in fams:
        k = w.corridors
        m = maze_edge_count(k.cols, k.rows)
        boxes.append(np.tile([k.cell / 2 + k.wall_thickness / 2, k.wall_thickness / 2], (m, 1)))
        box_roles.append(("maze", m))
    if planned(w):
        t = r.wall_thickness
        boxes.append(np.tile([extent_half(cfg) + t, t / 2], (4, 1)))
        box_roles.append(("bound", 4))
    roles: dict[str, np.ndarray] = {}
    start = 0
    for name, count in cyl_roles + box_roles:
        roles[name] = np.arange(start, start + count, dtype=np.int64)
        start += count
    return SlotSizes(np.concatenate(cyl).astype(np.float64), np.concatenate(boxes).astype(np.float64), roles)


def build_mjcf(cfg: EnvCfg) -> str:
    """The complete MJCF for ``cfg``: room, walls, obstacle slots, robot and actuators."""
    room = cfg.room
    half = extent_half(cfg)
    t = room.wall_thickness
    dt = cfg.control_period / cfg.physics_substeps
    sizes = slot_sizes(cfg)
    v, w = max(cfg.robot.v_max, cfg.robot.v_backward, cfg.robot.v_lateral), cfg.robot.omega_max
    iz = 0.5 * cfg.robot.radius**2  # a 1 kg disc of the shell's radius about its axis
    lines = [
        '<mujoco model="nav_room">',
        f'  <option timestep="{dt:.6g}" integrator="implicitfast" gravity="0 0 0" iterations="4" ls_iterations="4"/>',
        '  <default><geom contype="1" conaffinity="1" condim="1" friction="0 0 0"/></default>',
        "  <worldbody>",
    ]
    walls = [
        ("wall_px", half + t / 2, 0.0, t / 2, half + t),
        ("wall_nx", -half - t / 2, 0.0, t / 2, half + t),
        ("wall_py", 0.0, half + t / 2, half + t, t / 2),
        ("wall_ny", 0.0, -half - t / 2, half + t, t / 2),
    ]
    for name, x, y, sx, sy in walls:
        lines.append(
            f'    <geom name="{name}" type="box" pos="{x:.6g} {y:.6g} {OBSTACLE_HALF_HEIGHT}" '
            f'size="{sx:.6g} {sy:.6g} {OBSTACLE_HALF_HEIGHT}" rgba=".5 .5 .5 1"/>'
        )
    for i, rad in enumerate(sizes.cylinder_radius):
        lines.append(
            f'    <geom name="obs_cyl{i}" type="cylinder" pos="0 0 {PARK_Z}" '
            f'size="{rad:.6g} {OBSTACLE_HALF_HEIGHT}" rgba=".8 .4 .2 1"/>'
        )
    for i, (hx, hy) in enumerate(sizes.box_half):
        lines.append(
            f'    <geom name="obs_box{i}" type="box" pos="0 0 {PARK_Z}" '
            f'size="{hx:.6g} {hy:.6g} {OBSTACLE_HALF_HEIGHT}" rgba=".2 .4 .8 1"/>'
        )
    lines += [
        '    <body name="base" pos="0 0 0">',
        '      <joint name="jx" type="slide" axis="1 0 0" limited="false"/>',
        '      <joint name="jy" type="slide" axis="0 1 0" limited="false"/>',
        '      <joint name="jz" type="hinge" axis="0 0 1" limited="false"/>',
        f'      <inertial pos="0 0 {ROBOT_HALF_HEIGHT}" mass="1" diaginertia="{iz:.6g} {iz:.6g} {iz:.6g}"/>',
        f'      <geom name="shell" type="sphere" size="{cfg.robot.radius:.6g}" '
        f'pos="0 0 {ROBOT_HALF_HEIGHT}" rgba=".1 .7 .3 1"/>',
        "    </body>",
        "  </worldbody>",
        "  <actuator>",
        f'    <velocity name="vx" joint="jx" kv="100" ctrlrange="{-v} {v}" forcerange="-200 200"/>',
        f'    <velocity name="vy" joint="jy" kv="100" ctrlrange="{-v} {v}" forcerange="-200 200"/>',
        f'    <velocity name="wz" joint="jz" kv="2" ctrlrange="{-w} {w}" forcerange="-20 20"/>',
        "  </actuator>",
        "</mujoco>",
    ]
    return "\n".join(lines) + "\n"


def body_to_world(cmd: np.ndarray, yaw: np.ndarray | float) -> np.ndarray:
    """Body-frame commands [vx, vy, wz] (..., 3) -> world-frame actuator controls (..., 3) at
    heading ``yaw``: (vx, vy) rotated by yaw for ``vx``/``vy``, wz unchanged for ``wz``.

    The C MuJoCo side (``navsim.sim_world``) applies it before every physics substep; NavEnv runs
    the same rotation as a Warp kernel on the device (``navsim.env._body_command_to_ctrl``), and
    tests/test_sim_world.py holds the two to the same trajectories.
    """
    cmd = np.asarray(cmd, dtype=np.float64)
    c, s = np.cos(yaw), np.sin(yaw)
    return np.stack([c * cmd[..., 0] - s * cmd[..., 1], s * cmd[..., 0] + c * cmd[..., 1], cmd[..., 2]], axis=-1)


def geom_ids(model: object) -> dict[str, np.ndarray]:
    """Geom ids by role in a compiled MjModel: walls, obstacle slots (cylinders first), shell."""
    import mujoco

    names = [mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_GEOM, i) for i in range(model.ngeom)]
    walls = [i for i, n in enumerate(names) if n and n.startswith("wall_")]
    cyl = [i for i, n in enumerate(names) if n and n.startswith("obs_cyl")]
    box = [i for i, n in enumerate(names) if n and n.startswith("obs_box")]
    shell = [i for i, n in enumerate(names) if n == "shell"]
    return {
        "walls": np.array(walls, dtype=np.int64),
        "slots": np.array(cyl + box, dtype=np.int64),
        "shell": np.array(shell, dtype=np.int64),
    }
