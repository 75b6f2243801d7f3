# SPDX-License-Identifier: MIT
"""Locates the generated protocol module ``sensim_pb2`` (built by CMake, never committed).

Search order: an importable ``sensim_pb2`` (PYTHONPATH), then ``$SENSIM_PROTO_DIR``, then
``<repository>/build/python``. The module is registered under its own name so that protobuf's
descriptor pool sees it exactly once.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import pathlib
import sys
from types import ModuleType

_MODULE = "sensim_pb2"


def _load_from(directory: pathlib.Path) -> ModuleType | None:
    path = directory / f"{_MODULE}.py"
    if not path.is_file():
        return None
    spec = importlib.util.spec_from_file_location(_MODULE, path)
    if spec is None or spec.loader is None:
        return None
    module = importlib.util.module_from_spec(spec)
    sys.modules[_MODULE] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[_MODULE]
        raise
    return module


def _find() -> ModuleType:
    try:
        return importlib.import_module(_MODULE)
    except ModuleNotFoundError as exc:
        if exc.name != _MODULE:
            raise

    tried = ["PYTHONPATH"]
    env = os.environ.get("SENSIM_PROTO_DIR")
    if env:
        tried.append(f"$SENSIM_PROTO_DIR={env}")
        module = _load_from(pathlib.Path(env))
        if module is not None:
            return module

    # client-python/src/sensim/_proto.py -> repository root is three levels above src/sensim
    repo = pathlib.Path(__file__).resolve().parents[3]
    default = repo / "build" / "python"
    tried.append(str(default))
    module = _load_from(default)
    if module is not None:
        return module

    raise ImportError(
        "sensim: cannot find the generated protocol module 'sensim_pb2' (looked in "
        + ", ".join(tried)
        + "). Build it with `cmake --build <build dir> --target sensim_proto_py`, then put "
        "<build dir>/python on PYTHONPATH or set SENSIM_PROTO_DIR to it.",
        name=_MODULE,
    )


pb = _find()
