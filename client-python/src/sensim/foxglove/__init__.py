# SPDX-License-Identifier: MIT
"""sensim.foxglove: watch a running simulation live, in Foxglove or in the built-in page.

A bridge observes one environment of a sensimd and serves its sensors over the
``foxglove.websocket.v1`` protocol (point clouds as ``sensor_msgs/PointCloud2``, IMU samples
as ``sensor_msgs/Imu`` and ``sensor_msgs/MagneticField``, transforms as
``tf2_msgs/TFMessage``, all in ROS 1 encoding; encoders, odometers and cone sensors as JSON),
and serves a page drawing the clouds in 3D (three.js) on the same port. From the shell::

    python -m sensim.foxglove --port 7700 --environment demo --listen 127.0.0.1:8765

or from Python with :class:`Bridge`. See docs/foxglove.md.
"""

from .bridge import Bridge, body_frame, parse_address, sensor_frame

__all__ = ["Bridge", "body_frame", "sensor_frame", "parse_address"]
