# nav_policy on ROS 2 Kilted (official image, Ubuntu 24.04, Python 3.12). Two targets:
#
#   robot  ROS 2 base + numpy + scipy + pyyaml + onnxruntime + navcontract (contract/) + navdeploy (deploy/) + the nav_policy package,
#          which installs the trained default bundle (share/nav_policy/default_bundle).
#          No torch, no MuJoCo, no training code. Runs robot.launch.py against the robot's topics.
#   sim    robot + CPU torch, MuJoCo and the training side (training/, conf/) + the nav_policy_sim
#          package. Runs sim.launch.py: the sim node and the policy node in a closed loop.
#
#   docker build --target robot -t nav_policy:robot .
#   docker run --rm --net=host nav_policy:robot \
#       ros2 launch nav_policy robot.launch.py scan:=/lidar/scan cmd_vel:=/base/cmd_vel   # default bundle
#   docker run --rm --net=host -v /opt/bundle:/bundle -e NAV_POLICY_BUNDLE=/bundle nav_policy:robot   # your own
#   docker build --target sim -t nav_policy:sim .
#   docker run --rm nav_policy:sim                   # ros2 launch nav_policy sim.launch.py (default bundle)
#   docker run --rm nav_policy:sim ros2 launch nav_policy sim.launch.py seed:=7 lockstep:=true num_episodes:=5
#
# ROS 2 itself (rclpy, messages, launch, launch_ros, colcon, rosdep) comes from the image's apt
# packages; Python libraries come from requirements.txt (the one place versions are pinned) with pip,
# never its ros-* PyPI wheels (the image has the real ROS 2). torch comes from PyTorch's CPU index,
# so no CUDA build is pulled.
ARG ROS_DISTRO=kilted

# ------------------------------------------------------------------------------------------------
FROM ros:${ROS_DISTRO}-ros-base AS base
ARG ROS_DISTRO
ENV ROS_DISTRO=${ROS_DISTRO}

SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ENV DEBIAN_FRONTEND=noninteractive \
    PIP_BREAK_SYSTEM_PACKAGES=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONUNBUFFERED=1

RUN apt-get update \
    && apt-get install -y --no-install-recommends python3-pip python3-colcon-common-extensions \
    && rm -rf /var/lib/apt/lists/* \
    && rosdep update --rosdistro "${ROS_DISTRO}"

# Every command runs with ROS 2 and the workspace overlay sourced.
RUN printf '%s\n' '#!/bin/bash' 'set -e' \
      'source "/opt/ros/${ROS_DISTRO}/setup.bash" --' \
      'source /ws/ros2_ws/install/setup.bash --' \
      'exec "$@"' > /nav_policy_entrypoint.sh \
    && chmod +x /nav_policy_entrypoint.sh
WORKDIR /ws
ENTRYPOINT ["/nav_policy_entrypoint.sh"]

# ------------------------------------------------------------------------------------------------
FROM base AS robot

# The robot runtime's dependencies only (nav-policy-deploy: numpy, scipy, pyyaml, onnxruntime), at the pins.
COPY requirements.txt /ws/requirements.txt
RUN grep -E '^(numpy|scipy|pyyaml|onnxruntime)==' requirements.txt > /tmp/robot-requirements.txt \
    && test "$(wc -l < /tmp/robot-requirements.txt)" -eq 4 \
    && pip3 install -r /tmp/robot-requirements.txt

# navcontract (what a bundle promises) and navdeploy (ONNX runtime, command gate, scan map, DWA).
COPY contract /ws/contract
COPY deploy /ws/deploy
RUN pip3 install --no-deps /ws/contract /ws/deploy

# The robot ROS package (policy node, launch files, config, the trained default bundle), built with colcon.
COPY ros2_ws/src/nav_policy /ws/ros2_ws/src/nav_policy
RUN apt-get update \
    && rosdep install --from-paths ros2_ws/src/nav_policy --ignore-src -y --rosdistro "${ROS_DISTRO}" \
    && rm -rf /var/lib/apt/lists/* \
    && source "/opt/ros/${ROS_DISTRO}/setup.bash" \
    && cd ros2_ws && colcon build --packages-select nav_policy --event-handlers console_direct+ \
    && python3 -c "import navdeploy.runtime, onnxruntime; import importlib.util as u; assert u.find_spec('torch') is None" \
    && test -f install/nav_policy/share/nav_policy/default_bundle/policy.onnx \
    && test -f install/nav_policy/share/nav_policy/jackal_bundle/policy.onnx

# The bundle: bundle:=/path, else $NAV_POLICY_BUNDLE (e.g. -e NAV_POLICY_BUNDLE=/bundle with your
# bundle mounted there), else the one installed for robot_base:=jackal, else the trained default.
CMD ["ros2", "launch", "nav_policy", "robot.launch.py"]

# ------------------------------------------------------------------------------------------------
FROM robot AS sim

# The training side's dependencies: CPU torch first (from PyTorch's index), then the other pins
# except the ROS 2 PyPI wheels.
RUN pip3 install --index-url https://download.pytorch.org/whl/cpu "$(grep -E '^torch==' requirements.txt)" \
    && grep -v -E '^(ros-|torch==)' requirements.txt > /tmp/sim-requirements.txt \
    && pip3 install -r /tmp/sim-requirements.txt

# navsim / navtrain (editable: the config loader reads conf/nav.yaml next to training/).
COPY conf /ws/conf
COPY training /ws/training
RUN pip3 install --no-deps -e /ws/training

# The simulation ROS package (sim node, sim.yaml); it depends on nav_policy.
COPY ros2_ws/src/nav_policy_sim /ws/ros2_ws/src/nav_policy_sim
RUN apt-get update \
    && rosdep install --from-paths ros2_ws/src --ignore-src -y --rosdistro "${ROS_DISTRO}" \
    && rm -rf /var/lib/apt/lists/* \
    && source "/opt/ros/${ROS_DISTRO}/setup.bash" \
    && cd ros2_ws && colcon build --packages-up-to nav_policy_sim --event-handlers console_direct+

# The policy: nav_policy's installed default bundle; mount your own and pass bundle:=... to replace it.
CMD ["ros2", "launch", "nav_policy", "sim.launch.py"]
