"""Compile the ``.proto`` sources in the top-level ``proto/`` folder into this package.

Run by ``setup.py`` at build/install time, by ``make proto``, and by ``magnetar.proto`` on first
import in a source checkout whose generated modules are missing or older than their sources. It
imports nothing from magnetar so that the build can run it before the package is installed.
"""

from __future__ import annotations

import sys
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
SOURCE_DIR = PACKAGE_DIR.parent.parent / "proto"


def sources() -> list[Path]:
    return sorted(SOURCE_DIR.glob("*.proto")) if SOURCE_DIR.is_dir() else []


def is_stale() -> bool:
    """True when a source is newer than its generated module (or the module is missing)."""
    for src in sources():
        out = PACKAGE_DIR / f"{src.stem}_pb2.py"
        if not out.exists() or out.stat().st_mtime < src.stat().st_mtime:
            return True
    return False


def generate() -> None:
    from grpc_tools import protoc  # build-time dependency

    protos = sources()
    if not protos:
        return
    include = Path(protoc.__file__).parent / "_proto"
    out_root = PACKAGE_DIR.parent.parent
    # Map proto/ onto the virtual directory magnetar/proto so the generated modules import each
    # other as ``magnetar.proto.x_pb2`` rather than as top-level modules.
    args = [
        "grpc_tools.protoc",
        f"-I{include}",
        f"-Imagnetar/proto={SOURCE_DIR}",
        f"--python_out={out_root}",
        f"--pyi_out={out_root}",
        f"--grpc_python_out={out_root}",
        *[str(p) for p in protos],
    ]
    if protoc.main(args) != 0:
        raise RuntimeError(f"protoc failed on {', '.join(p.name for p in protos)}")


if __name__ == "__main__":
    generate()
    sys.exit(0)
