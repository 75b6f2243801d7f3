# SPDX-License-Identifier: MIT
"""sensim: Python client of the sensimd sensor-simulation daemon (protocol v1).

    import sensim
    with sensim.Client(port=7700) as c:
        print(c.get_info().server_version)

Errors are classes of :mod:`sensim.errors`, one per protocol status code. The generated protocol
module is available as ``sensim.pb`` (``sensim_pb2``).
"""

from . import errors
from ._proto import pb
from .client import PROTOCOL_VERSION, RAYCAST_DTYPE, Client, point_cloud_to_numpy
from .errors import SensimError
from .outputs import SensorOutput, outputs
from .shard import ShardedClient, shard_for

__all__ = ["Client", "SensimError", "errors", "pb", "PROTOCOL_VERSION", "RAYCAST_DTYPE",
           "point_cloud_to_numpy", "SensorOutput", "outputs", "ShardedClient", "shard_for"]
__version__ = "0.1.0"
