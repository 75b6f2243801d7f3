# SPDX-License-Identifier: MIT
"""Build step of the sensim package: the protocol module sensim_pb2 is generated from the
protocol's single source, proto/sensim.proto (a link to ../proto/sensim/v1/sensim.proto in
the repository; a copy in a source distribution), with protoc into the built package, so an
installed sensim needs no build tree. Everything else is declared in pyproject.toml."""

import os
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO = os.path.join(HERE, "proto", "sensim.proto")


class build_py_with_protocol(build_py):
    """build_py, then protoc --python_out into the built package."""

    def run(self):
        super().run()
        protoc = os.environ.get("PROTOC") or shutil.which("protoc")
        if not protoc:
            raise SystemExit("sensim: protoc is needed to generate the protocol module "
                             "(Debian: apt-get install protobuf-compiler; or set $PROTOC)")
        if not os.path.isfile(PROTO):
            raise SystemExit(f"sensim: the protocol source {PROTO} is missing")
        out = os.path.join(self.build_lib, "sensim")
        os.makedirs(out, exist_ok=True)
        subprocess.run([protoc, "-I" + os.path.dirname(PROTO), "--python_out=" + out, PROTO],
                       check=True)


setup(cmdclass={"build_py": build_py_with_protocol})
