"""One node of `magnetar kube up` for the whole kube tier, the chart installed on it once.

A node takes about 25 s to come up and 50 s to go down, so the modules share one: each puts its
MagnetarClusters in names (and Kubernetes namespaces) of its own and removes them when it ends.
``test_node.py`` keeps a node of its own: it kills the node's containerd and kubelet and takes it
down. The tier's modules run in the order of ``ORDER`` (the node-less and own-node ones first, the
one that deletes the operator's pod last), and the shared node goes down right after the tier's
last test, so the rest of the suite does not run beside an idle node.
"""

from __future__ import annotations

from collections.abc import Generator
from pathlib import Path

import pytest

from tests.kube.pods import ROOT, Cluster, Node, install_chart, install_cluster, start_node

TIER = Path(__file__).resolve().parent
PORT_BASE = 19440  # not the default, so a node a user keeps under the default state is told apart
#: PersistentVolumes for every module's clusters: they stay Released once their claims go
VOLUMES = 64
#: the tier's modules in the order they run; those not named run after them
ORDER = (
    "test_volumes.py",
    "test_image.py",
    "test_node.py",
    "test_chaos_pods.py",
    "test_geo_pods.py",
    "test_operator_pods.py",
    "test_operator_promises_pods.py",  # deletes the operator's pod mid-rollout: last
)
REGION_A = "region-a"


def in_tier(item: pytest.Item | None) -> bool:
    return item is not None and TIER in Path(str(item.path)).parents


class SharedNode:
    """The tier's node and the region-a cluster of examples/k8s/local/cluster.yaml, started on
    first use and taken down when the tier ends."""

    def __init__(self) -> None:
        self._running: Generator[Node, None, None] | None = None
        self._node: Node | None = None
        self._region_a: Cluster | None = None

    def node(self, tmp_path_factory: pytest.TempPathFactory) -> Node:
        if self._node is None:
            running = start_node(tmp_path_factory, PORT_BASE, volumes=VOLUMES)
            node = next(running)  # skips the tier, saying why, where no node can run
            self._running = running
            install_chart(node)
            self._node = node
        return self._node

    def region_a(self, tmp_path_factory: pytest.TempPathFactory) -> Cluster:
        if self._region_a is None:
            node = self.node(tmp_path_factory)
            manifest = ROOT / "examples/k8s/local/cluster.yaml"
            self._region_a = install_cluster(node, manifest, REGION_A, tmp_path_factory)
        return self._region_a

    def down(self) -> None:
        running, self._running, self._node, self._region_a = self._running, None, None, None
        if running is not None:
            next(running, None)  # `magnetar kube down`, which asserts it succeeded


_shared = SharedNode()


@pytest.fixture(scope="session")
def node(tmp_path_factory: pytest.TempPathFactory) -> Node:
    return _shared.node(tmp_path_factory)


@pytest.fixture(scope="session")
def region_a(tmp_path_factory: pytest.TempPathFactory) -> Cluster:
    """examples/k8s/local/cluster.yaml as a user applies it (test_operator_pods.py reads it,
    test_operator_promises_pods.py then scales and rolls it)."""
    return _shared.region_a(tmp_path_factory)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        name = Path(str(item.path)).name
        return ORDER.index(name) if name in ORDER else len(ORDER)

    places = [i for i, item in enumerate(items) if in_tier(item)]
    for place, item in zip(places, sorted((items[i] for i in places), key=rank), strict=True):
        items[place] = item


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, None, None]:
    try:
        return (yield)
    finally:
        if in_tier(item) and not in_tier(nextitem):
            _shared.down()


def pytest_sessionfinish() -> None:
    _shared.down()
