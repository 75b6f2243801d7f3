# SPDX-License-Identifier: MIT
"""sensim: Python client of the sensimd sensor-simulation daemon (protocol v1).

    import sensim
    with sensim.Client(port=7700) as c:
        print(c.get_info().server_version)

Errors are classes of :mod:`sensim.errors`, one per protocol status code. The generated protocol
module is available as ``sensim.pb`` (``sensim_pb2``). Tools in their own modules, imported on
use: :mod:`sensim.presets` (lidar devices), :mod:`sensim.lockstep` (steps in flight),
:mod:`sensim.stream` (subscriptions as iterators), :mod:`sensim.export` (PCD, PLY, XYZ, CSV),
:mod:`sensim.bag` (ROS 1 bags), :mod:`sensim.mesh` (mesh files), :mod:`sensim.plot` (PNG
pictures), :mod:`sensim.record` and :mod:`sensim.recording` (recordings), :mod:`sensim.cli`
(``python -m sensim``).
"""

__version__ = "0.1.0"

from . import errors, presets
from ._proto import pb
from .client import PROTOCOL_VERSION, RAYCAST_DTYPE, Client, point_cloud_to_numpy
from .errors import SensimError
from .lockstep import LockStep, StepResult
from .mesh import Mesh, load_mesh
from .outputs import (CloudMeta, ConeReading, ImuSample, ScalarSample, SensorOutput, StepDone,
                      by_sensor, outputs)
from .shard import ShardedClient, shard_for
from .stream import Subscription

__all__ = ["Client", "SensimError", "errors", "pb", "PROTOCOL_VERSION", "RAYCAST_DTYPE",
           "point_cloud_to_numpy", "SensorOutput", "outputs", "by_sensor", "ImuSample",
           "ScalarSample", "ConeReading", "CloudMeta", "StepDone", "LockStep", "StepResult",
           "Subscription", "Mesh", "load_mesh", "presets", "ShardedClient", "shard_for"]
