"""The images every node starts with, imported once per set of tarballs, as kind's node image has
its images preloaded.

Importing ``make image``'s tarballs into a node's fresh containerd takes 10-14 s and about 16
core-seconds, and writes 1.1 GB (the blobs, then the unpacked layers) that the kernel writes back
later, beside the bookies' journal syncs. So a containerd of the store's own imports them once into
a root kept in the cache (the store, keyed by the tarballs and containerd's version), and a node's
root starts as a copy of it: every file below a plugin's own directory (content blobs, unpacked
layers), which containerd never changes once written, is a hard link; the files a plugin keeps at
its top (its bolt databases) are copies. Where the copy cannot be made (the state directory on
another filesystem), or a tarball could not be imported into the store, the node imports the
tarballs itself as before.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from magnetar.kube import containerd
from magnetar.kube.layout import CACHE, Layout

STORE = CACHE / "kube" / "image-store"
#: the marker of a store whose every tarball was imported
COMPLETE = "complete"

Say = Callable[[str], None]


def key(tarballs: list[Path]) -> str:
    """Names the store of these tarballs (each by name, size, time and the image id `make image`
    wrote beside it) for this containerd."""
    digest = hashlib.sha256(_containerd_version().encode())
    for tarball in tarballs:
        stat = tarball.stat()
        id_file = tarball.with_name(tarball.name + ".id")
        image_id = id_file.read_text().strip() if id_file.is_file() else ""
        digest.update(f"{tarball.name}\0{stat.st_size}\0{stat.st_mtime_ns}\0{image_id}\0".encode())
    return digest.hexdigest()[:16]


def seed(layout: Layout, say: Say, store: Path = STORE) -> bool:
    """The node's containerd root made a copy of the store of today's tarballs (see above), the
    store imported first if there is none; False, and no root left behind, when there are no
    tarballs, one could not be imported, or the copy cannot be made."""
    tarballs = containerd.tarballs()
    target = layout.containerd / "root"
    if not tarballs or target.exists():
        return False  # a node's own images are never replaced
    home = store / key(tarballs)
    with _locked(store / "lock"):  # one builder at a time, and no store removed while copied
        if not (home / COMPLETE).exists() and not _build(home, say):
            return False
        return _copy(Layout(home).containerd / "root", target, say)


def _build(home: Path, say: Say) -> bool:
    """The store at ``home``, the stores of tarballs since rewritten removed; False when a tarball
    could not be imported."""
    for old in (p for p in home.parent.iterdir() if p.is_dir()):
        shutil.rmtree(old, ignore_errors=True)
    if not _import(Layout(home), say):
        shutil.rmtree(home, ignore_errors=True)
        return False
    (home / COMPLETE).write_text(f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}\n")
    return True


def _copy(root: Path, target: Path, say: Say) -> bool:
    target.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    copied = subprocess.run(["cp", "-a", "--link", str(root), str(target)], capture_output=True, text=True)
    if copied.returncode != 0:
        shutil.rmtree(target, ignore_errors=True)
        say(f"images not linked from {root} ({copied.stderr.strip()}); importing them")
        return False
    for linked in (p for p in target.glob("*/*") if p.is_file() and not p.is_symlink()):
        _unlink_copy(linked)
    say(f"images from the store {root.parent.parent.name} ({time.monotonic() - started:.1f}s)")
    return True


def _unlink_copy(path: Path) -> None:
    """``path`` a file of its own with the same bytes and attributes, no longer a link."""
    copy = path.with_name(path.name + ".copy")
    shutil.copy2(path, copy)
    os.replace(copy, path)


def _import(layout: Layout, say: Say) -> bool:
    """Every tarball imported into ``layout``'s containerd root by a containerd started for it
    alone; False when one could not be."""
    say(f"importing the images once, into the store {layout.state_dir}")
    config = containerd.write_config(layout)
    with (layout.containerd / "containerd.log").open("ab") as log:
        process = subprocess.Popen(
            ["containerd", "--config", str(config)],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
    imported = False
    try:
        _wait_answering(layout, process)
        imported = not containerd.import_images(layout, say, containerd.tarballs())
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        say(f"the image store could not be made ({exc}); importing the images into the node")
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    shutil.rmtree(layout.containerd / "state", ignore_errors=True)
    return imported


def _wait_answering(layout: Layout, process: subprocess.Popen[bytes], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not (layout.containerd_socket.exists() and containerd.ctr(layout, "version", check=False)):
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(
                f"the image store's containerd did not answer (log {layout.containerd / 'containerd.log'})"
            )
        time.sleep(0.1)


def _containerd_version() -> str:
    try:
        found = subprocess.run(["containerd", "--version"], capture_output=True, text=True)
    except OSError:
        return ""  # no containerd here: nothing will be imported either
    return found.stdout.strip()


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
