"""The sandbox ("pause") image every pod starts from, made here since no image registry is
reachable: a static binary compiled from pause.c (sleep until SIGTERM/SIGINT, reap children)
packed into an OCI image archive that ``ctr images import`` takes."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import subprocess
import tarfile
import tempfile
from pathlib import Path

from magnetar.kube.layout import PAUSE_IMAGE

#: the sandbox process's source, shared with `make image`'s pause image (images/pause/Dockerfile)
PAUSE_C = Path(__file__).with_name("pause.c")


def build_archive(dest: Path, ref: str = PAUSE_IMAGE) -> Path:
    """Writes an OCI image layout tar for ``ref`` (amd64/linux, one layer: /pause) to ``dest``."""
    with tempfile.TemporaryDirectory() as tmp:
        binary = Path(tmp) / "pause"
        subprocess.run(["gcc", "-O2", "-static", "-s", "-o", str(binary), str(PAUSE_C)],
                       check=True, capture_output=True, timeout=120)  # fmt: skip
        layer = _layer(binary.read_bytes())
    diff_id = _sha(gzip.decompress(layer))
    config = _json({
        "architecture": "amd64",
        "os": "linux",
        "config": {"Entrypoint": ["/pause"], "User": "65535:65535"},
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
    })  # fmt: skip
    manifest = _json({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": _descriptor("application/vnd.oci.image.config.v1+json", config),
        "layers": [_descriptor("application/vnd.oci.image.layer.v1.tar+gzip", layer)],
    })  # fmt: skip
    index = _json({
        "schemaVersion": 2,
        "manifests": [{
            **_descriptor("application/vnd.oci.image.manifest.v1+json", manifest),
            "annotations": {"io.containerd.image.name": ref, "org.opencontainers.image.ref.name": ref},
        }],
    })  # fmt: skip
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(dest, "w") as tar:
        _add(tar, "oci-layout", _json({"imageLayoutVersion": "1.0.0"}))
        _add(tar, "index.json", index)
        for blob in (config, manifest, layer):
            _add(tar, f"blobs/sha256/{_sha(blob).split(':')[1]}", blob)
    return dest


def _layer(binary: bytes) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        info = tarfile.TarInfo("pause")
        info.size, info.mode = len(binary), 0o755
        tar.addfile(info, io.BytesIO(binary))
    return gzip.compress(raw.getvalue(), mtime=0)  # mtime 0: the same binary gives the same digest


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def _json(doc: object) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def _sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _descriptor(media_type: str, data: bytes) -> dict[str, object]:
    return {"mediaType": media_type, "digest": _sha(data), "size": len(data)}
