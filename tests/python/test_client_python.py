# SPDX-License-Identifier: MIT
"""The Python client's own pieces, without a daemon: framing, error vocabulary, conversions."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from sensim import _framing, client, errors, pb


def test_client_python_error_classes_match_status_codes():
    for name, number in pb.StatusCode.items():
        if number == pb.OK:
            continue
        err = errors.error_for(number, "field x")
        assert err.code == number
        assert err.name == name
        assert err.message == "field x"
        assert isinstance(err, errors.SensimError)
    assert isinstance(errors.error_for(99, "?"), errors.UnknownStatus)
    # the client-side codes equal the C client's sensim_status_t
    assert [e.code for e in (errors.TransportError, errors.ConnectionClosed, errors.Timeout,
                             errors.ProtocolError)] == [101, 102, 103, 104]
    assert issubclass(errors.ConnectionClosed, ConnectionError)
    assert issubclass(errors.Timeout, TimeoutError)


def test_client_python_frame_decoder_reassembles_and_keeps_remainder():
    data = _framing.encode(b"abc") + _framing.encode(b"") + _framing.encode(b"x" * 300)
    dec = _framing.FrameDecoder()
    out = []
    for i in range(len(data)):
        dec.feed(data[i:i + 1])
        while (f := dec.next_frame()) is not None:
            out.append(f)
    assert out == [b"abc", b"", b"x" * 300]
    assert len(dec) == 0


def test_client_python_frame_decoder_rejects_length_before_body():
    dec = _framing.FrameDecoder(max_frame_bytes=10)
    dec.feed(struct.pack("<I", 11))
    with pytest.raises(_framing.FrameTooLarge):
        dec.next_frame()


def test_client_python_pose_forms():
    ident = pb.Pose()
    ident.position.x, ident.position.y, ident.position.z = 1, 2, 3
    ident.orientation.w = 1
    ident.orientation.x = ident.orientation.y = ident.orientation.z = 0
    forms = (((1, 2, 3), (0, 0, 0, 1)), [1, 2, 3, 0, 0, 0, 1], np.array([1, 2, 3, 0, 0, 0, 1.0]),
             {"position": (1, 2, 3), "orientation": (0, 0, 0, 1)})
    for form in forms:
        assert client._pose(form, "pose") == ident
    position_only = client._pose((1, 2, 3), "pose")
    assert position_only.HasField("position") and not position_only.HasField("orientation")
    with pytest.raises(ValueError):
        client._pose([1, 2, 3, 4], "pose")


def test_client_python_packed_arrays():
    v = client._packed(np.arange(9).reshape(3, 3), "<f4", 3, "vertices")
    assert np.frombuffer(v, "<f4").tolist() == list(range(9))
    with pytest.raises(ValueError):
        client._packed([[0, 1]], "<u4", 3, "indices")
    with pytest.raises(ValueError):
        client._packed([[0, -1, 2]], "<u4", 3, "indices")
    assert client._packed(b"\0" * 12, "<u4", 3, "indices").tobytes() == b"\0" * 12


def test_client_python_finds_generated_module_through_env(tmp_path):
    import os
    import pathlib
    import subprocess
    import sys

    import sensim_pb2
    src = pathlib.Path(client.__file__).resolve().parents[1]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SENSIM_PROTO_DIR")}
    code = "import sensim; print(sensim.pb.__file__)"

    env.update(PYTHONPATH=str(src), SENSIM_PROTO_DIR=str(pathlib.Path(sensim_pb2.__file__).parent))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       cwd=tmp_path)
    assert r.returncode == 0, r.stderr

    env.update(SENSIM_PROTO_DIR=str(tmp_path))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       cwd=tmp_path)
    if r.returncode != 0:       # no <repo>/build/python either: the message says what to do
        assert "sensim_pb2" in r.stderr and "SENSIM_PROTO_DIR" in r.stderr, r.stderr
