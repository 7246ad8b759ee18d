"""The chaos lab's Kubernetes target: the pods of ``MagnetarCluster``s as the processes the
activities act on.

A run against pods gets a cluster directory like ``magnetar local``'s, whose ``kube.json`` names a
kubeconfig, the node's containerd and the clusters (``target.write``). The activities load it as
they load a local cluster's ``state.json`` (``magnetar.chaos.process.targets.load``), but the
processes are read live: every pod of the clusters, with the host PID of its container's process
(from the container runtime), its address and its broker URLs. So the same experiments kill,
stop and freeze containers (a signal to that PID, from the host), and where a local cluster would
start a process again, the kubelet restarts the container and the activity waits for it
(``target.wait_restarted``).
"""

from __future__ import annotations

from pathlib import Path

#: the file that makes a cluster directory a Kubernetes target (``target.write``)
KUBE_FILE = "kube.json"


def is_kube(directory: Path) -> bool:
    """Whether ``directory`` is a Kubernetes target. Here rather than in ``target``, which loads
    the operator and the Kubernetes client: asked by every activity, it must not cost a local
    run those imports."""
    return (directory / KUBE_FILE).exists()
