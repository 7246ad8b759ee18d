"""Generates the gRPC/protobuf modules from proto/ whenever the package is built or installed.

The generated files are build outputs: they are written next to the sources (so editable installs
see them) and never committed.
"""

import importlib.util
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

_GENERATOR = Path(__file__).parent / "magnetar" / "proto" / "generate.py"


def _generate() -> None:
    spec = importlib.util.spec_from_file_location("magnetar_proto_generate", _GENERATOR)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.generate()


class BuildPyWithProto(build_py):
    def run(self) -> None:
        _generate()
        super().run()


setup(cmdclass={"build_py": BuildPyWithProto})
