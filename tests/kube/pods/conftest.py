"""One node and one chart for every module of real pods: a node comes up in about 25 s with its
images and goes down in about 50 s with pods on it, so the modules share it rather than each
bringing its own. Each module works in a Kubernetes namespace of its own and deletes it at its end
(harness.module_namespace). `test_node.py`, outside this package, keeps a node of its own: it
tests bringing one up and down, and runs once this one is down."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.kube.pods.harness import Node, install_chart, start_node

PORT_BASE = 18440  # neither the default nor test_node.py's


@pytest.fixture(scope="package")
def kube_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    yield from start_node(tmp_path_factory, PORT_BASE)


@pytest.fixture(scope="package")
def chart(kube_node: Node) -> Node:
    """The node with the chart installed: its CRDs and the operator, which watches every namespace."""
    print(f"\nhelm install --wait: {install_chart(kube_node):.0f}s")
    return kube_node
