# SPDX-License-Identifier: MIT
"""A client that sends its requests and then shuts down its sending side (half close, as
`nc -N` or a batch script does) still receives every reply before the daemon closes."""

from __future__ import annotations

import socket

from sensim import pb

from rawwire import frame, read_all


def test_half_closed_client_gets_every_reply(sensimd):
    hello = pb.Envelope(id=1)
    hello.hello.protocol_version = pb.PROTOCOL_VERSION
    batch = [hello]
    prim = pb.Envelope(id=2)
    prim.create_primitive.id = 1
    prim.create_primitive.sphere.radius = 1.0
    obj = pb.Envelope(id=3)
    obj.create_object.id = 1
    obj.create_object.geometry_id = 1
    cast = pb.Envelope(id=4)
    cast.raycast.origins.extend([-5, 0, 0])
    cast.raycast.directions.extend([1, 0, 0])
    ping = pb.Envelope(id=5)
    ping.ping.payload = b"last"
    batch += [prim, obj, cast, ping]
    with socket.create_connection(("127.0.0.1", sensimd.port)) as sock:
        sock.sendall(b"".join(frame(e) for e in batch))
        sock.shutdown(socket.SHUT_WR)
        replies = read_all(sock)
    assert [r.id for r in replies] == [1, 2, 3, 4, 5]
    assert all(r.status.code == pb.OK for r in replies)
    assert abs(replies[3].raycast_result.distances[0] - 4.0) < 1e-4
    assert replies[4].pong.payload == b"last"
