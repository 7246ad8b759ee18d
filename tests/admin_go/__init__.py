"""The official Go admin client (``pulsaradmin`` of apache/pulsar-client-go v0.19.0) as a test
driver: built once from the Go module proxy into ~/.cache/magnetar/admin-go (keyed by its sources;
`make test` builds it before pytest, beside the other builds, and a test builds it if it is missing),
then run as a process that takes one JSON call per line (main.go says the format)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
SOURCES = ("main.go", "go.mod", "go.sum")
CACHE = Path.home() / ".cache" / "magnetar" / "admin-go"


def build() -> Path:
    digest = hashlib.sha256(b"".join((HERE / s).read_bytes() for s in SOURCES)).hexdigest()[:16]
    binary = CACHE / digest / "admin-go"
    if binary.exists():
        return binary
    if shutil.which("go") is None:
        raise RuntimeError("Go is needed to build the Go admin client driver (https://go.dev/dl)")
    binary.parent.mkdir(parents=True, exist_ok=True)
    # a name of this process's own: two test processes (xdist workers, two clones' runs) on a cold
    # cache both build, and each moves its own whole build into place
    partial = binary.with_name(f"admin-go.{os.getpid()}.tmp")
    built = subprocess.run(
        ["go", "build", "-o", str(partial), "."],
        cwd=HERE,
        env={**os.environ, "GOFLAGS": "-mod=readonly -buildvcs=false"},
        capture_output=True,
        text=True,
        timeout=1200,
    )
    if built.returncode != 0:
        raise RuntimeError(f"go build of the admin driver failed:\n{built.stderr[-3000:]}")
    os.replace(partial, binary)
    return binary


@dataclass
class Answer:
    ok: bool
    result: Any = None
    #: the HTTP status the client's rest.Error carries (0: not an HTTP error)
    code: int = 0
    reason: str = ""


class GoAdmin:
    """One driver process against one web service URL."""

    def __init__(self, web_service_url: str) -> None:
        self._process = subprocess.Popen(
            [str(build()), web_service_url],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def __call__(self, op: str, **args: Any) -> Answer:
        assert self._process.stdin is not None
        assert self._process.stdout is not None
        self._process.stdin.write(json.dumps({"op": op, **args}) + "\n")
        self._process.stdin.flush()
        line = self._process.stdout.readline()
        if not line:
            raise RuntimeError(f"the Go admin driver exited ({self._process.poll()})")
        raw = json.loads(line)
        return Answer(raw["ok"], raw.get("result"), raw.get("code", 0), raw.get("reason", ""))

    def ok(self, op: str, **args: Any) -> Any:
        answer = self(op, **args)
        assert answer.ok, f"{op} {args}: {answer.code} {answer.reason}"
        return answer.result

    def close(self) -> None:
        if self._process.stdin is not None:
            self._process.stdin.close()
        self._process.wait(10)
