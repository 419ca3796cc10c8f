# nav_policy on ROS 2 Kilted (official image, Ubuntu 24.04, Python 3.12).
#
#   docker build -t nav_policy .
#   docker run --rm nav_policy                      # ros2 launch nav_policy sim.launch.py (fixture bundle)
#   docker run --rm nav_policy ros2 launch nav_policy sim.launch.py seed:=7 lockstep:=true num_episodes:=5
#   docker run --rm --net=host -v /opt/bundle:/bundle nav_policy \
#       ros2 launch nav_policy robot.launch.py bundle:=/bundle scan:=/lidar/scan
#
# ROS 2 itself (rclpy, messages, launch, launch_ros, colcon) comes from the image's apt packages;
# the Python dependencies come from requirements.txt with pip, minus the ros-* PyPI wheels (the
# image has the real ROS 2), with torch from PyTorch's CPU index so no CUDA build is pulled.
ARG ROS_DISTRO=kilted
FROM ros:${ROS_DISTRO}-ros-base

SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ENV DEBIAN_FRONTEND=noninteractive \
    PIP_BREAK_SYSTEM_PACKAGES=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONUNBUFFERED=1

RUN apt-get update \
    && apt-get install -y --no-install-recommends python3-pip python3-colcon-common-extensions \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /ws
# Dependencies first (their layer survives source edits).
COPY requirements.txt pyproject.toml ./
RUN pip3 install --index-url https://download.pytorch.org/whl/cpu torch==2.13.0 \
    && grep -v -E '^(ros-|rosgraph_msgs)' requirements.txt > /tmp/requirements.docker.txt \
    && pip3 install -r /tmp/requirements.docker.txt

COPY . .
# The training / deploy packages (navsim, navdeploy) the nodes import, then the ROS 2 package.
RUN pip3 install --no-deps -e . \
    && apt-get update \
    && rosdep update --rosdistro "${ROS_DISTRO}" \
    && rosdep install --from-paths ros2_ws/src --ignore-src -y --rosdistro "${ROS_DISTRO}" \
    && rm -rf /var/lib/apt/lists/* \
    && source "/opt/ros/${ROS_DISTRO}/setup.bash" \
    && cd ros2_ws && colcon build --packages-select nav_policy --event-handlers console_direct+

# Source ROS 2 and the workspace overlay for every command.
RUN printf '%s\n' '#!/bin/bash' 'set -e' \
      'source "/opt/ros/${ROS_DISTRO}/setup.bash" --' \
      'source /ws/ros2_ws/install/setup.bash --' \
      'exec "$@"' > /nav_policy_entrypoint.sh \
    && chmod +x /nav_policy_entrypoint.sh

# The trained bundle shipped with the tests; mount your own and pass bundle:=... to replace it.
ENV NAV_POLICY_BUNDLE=/ws/tests/fixtures/bundle
ENTRYPOINT ["/nav_policy_entrypoint.sh"]
CMD ["ros2", "launch", "nav_policy", "sim.launch.py"]
