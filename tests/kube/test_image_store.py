"""The node's images from the store (no node needed): a node's containerd root is the store's with
the unchanging files linked and containerd's own databases copied, a store is made once per set of
tarballs, and a node whose store cannot be made imports its images itself.
tests/kube/test_node.py and the pod modules start real nodes from it."""

from __future__ import annotations

from pathlib import Path

import pytest

from magnetar.kube import containerd, image_store
from magnetar.kube.layout import Layout

BLOB = "io.containerd.content.v1.content/blobs/sha256/0a1b"
LAYER_FILE = "io.containerd.snapshotter.v1.overlayfs/snapshots/1/fs/usr/bin/tool"
DATABASES = ("io.containerd.metadata.v1.bolt/meta.db", "io.containerd.snapshotter.v1.overlayfs/metadata.db")


def fake_root(root: Path) -> None:
    for name in (BLOB, LAYER_FILE, *DATABASES):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(name.encode())


@pytest.fixture
def tarballs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    images = tmp_path / "images"
    images.mkdir()
    found = [images / "magnetar-0.1.0.tar", images / "zookeeper-3.8.tar"]
    for tarball in found:
        tarball.write_bytes(b"tar")
        (images / f"{tarball.name}.id").write_text("sha256:1\n")
    monkeypatch.setattr(containerd, "tarballs", lambda: found)
    return found


def built(store: Path, tarballs: list[Path]) -> Path:
    """A store as `_build` leaves it, for ``tarballs``; its root."""
    home = store / image_store.key(tarballs)
    root = Layout(home).containerd / "root"
    fake_root(root)
    (home / image_store.COMPLETE).write_text("now\n")
    return root


def test_a_node_links_the_layers_and_blobs_and_copies_the_databases(
    tmp_path: Path, tarballs: list[Path]
) -> None:
    store = tmp_path / "store"
    root = built(store, tarballs)
    node = Layout(tmp_path / "node")
    assert image_store.seed(node, print, store)
    target = node.containerd / "root"
    for name in (BLOB, LAYER_FILE):
        assert (target / name).stat().st_ino == (root / name).stat().st_ino, f"{name} is linked"
    for name in DATABASES:
        assert (target / name).stat().st_ino != (root / name).stat().st_ino, f"{name} is a copy"
        (target / name).write_bytes(b"the node's own")
        assert (root / name).read_bytes() == name.encode(), "the store's database is untouched"


def test_a_node_with_a_root_of_its_own_keeps_it(tmp_path: Path, tarballs: list[Path]) -> None:
    store = tmp_path / "store"
    built(store, tarballs)
    node = Layout(tmp_path / "node")
    (node.containerd / "root").mkdir(parents=True)
    assert not image_store.seed(node, print, store)
    assert not any((node.containerd / "root").iterdir())


def test_the_store_is_made_once_and_again_when_a_tarball_changes(
    tmp_path: Path, tarballs: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[Path] = []

    def make(layout: Layout, _say: image_store.Say) -> bool:
        made.append(layout.state_dir)
        fake_root(layout.containerd / "root")
        return True

    monkeypatch.setattr(image_store, "_import", make)
    store = tmp_path / "store"
    for node in ("a", "b"):
        assert image_store.seed(Layout(tmp_path / node), print, store)
    assert len(made) == 1, "the second node used the first one's store"
    (tarballs[0].parent / f"{tarballs[0].name}.id").write_text("sha256:2\n")  # `make image` again
    assert image_store.seed(Layout(tmp_path / "c"), print, store)
    assert len(made) == 2
    assert [p.name for p in store.iterdir() if p.is_dir()] == [made[1].name], "the old store is gone"


def test_a_store_that_cannot_be_made_leaves_the_node_to_import(
    tmp_path: Path, tarballs: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(image_store, "_import", lambda _layout, _say: False)
    store = tmp_path / "store"
    node = Layout(tmp_path / "node")
    assert not image_store.seed(node, print, store)
    assert not (node.containerd / "root").exists()
    assert not [p for p in store.iterdir() if p.is_dir()], "no half-made store kept"
