"""ZooKeeper's StatefulSet under the operator's security context, whatever user its image was made
for: the official `zookeeper:3.9` runs as root by default and its /conf belongs to uid 1000, so a
pod of uid 10000 with a read-only root filesystem has ZooKeeper write everything it writes on
volumes: zoo.cfg into a directory of its own, myid, snapshots and the transaction log on the data
claim (kept across restarts), Java's files in /tmp. The pods themselves: tests/kube/test_operator_pods.py."""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

from magnetar.operator.manifests import RUN_AS, render_cluster
from magnetar.operator.resources import ClusterSpec


def zookeeper_pod(spec: dict[str, Any] | None = None) -> dict[str, Any]:
    objs = render_cluster(ClusterSpec.model_validate(spec or {}), "region-a", "default")
    sts = next(
        o for o in objs if o["kind"] == "StatefulSet" and o["metadata"]["name"] == "region-a-zookeeper"
    )
    return {"template": sts["spec"]["template"]["spec"], "claims": sts["spec"]["volumeClaimTemplates"]}


def mounted_on(container: dict[str, Any], path: str) -> str | None:
    """The volume ``path`` is on in ``container`` (the deepest mount holding it), else None."""
    holding = [m for m in container["volumeMounts"] if PurePosixPath(path).is_relative_to(m["mountPath"])]
    return max(holding, key=lambda m: len(m["mountPath"]))["name"] if holding else None


def test_zookeeper_runs_as_the_operators_user_on_a_read_only_root() -> None:
    pod = zookeeper_pod()["template"]
    security = pod["securityContext"]
    assert (security["runAsUser"], security["runAsGroup"], security["fsGroup"]) == (RUN_AS, RUN_AS, RUN_AS)
    assert security["runAsNonRoot"] is True
    (container,) = pod["containers"]
    assert container["image"] == "zookeeper:3.9"  # the default: the official image
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}


def test_everything_zookeeper_writes_is_on_a_volume_and_its_data_on_the_claim() -> None:
    rendered = zookeeper_pod({"metadataStore": {"zookeeper": {"image": "zookeeper:3.9.4", "replicas": 3}}})
    pod, claims = rendered["template"], rendered["claims"]
    (container,) = pod["containers"]
    env = {e["name"]: e["value"] for e in container["env"]}
    empty_dirs = {v["name"] for v in pod["volumes"] if "emptyDir" in v}
    claimed = {c["metadata"]["name"] for c in claims}
    # zoo.cfg: written by the entrypoint into a directory of the pod's own, never the image's /conf
    conf = env["ZOO_CONF_DIR"]
    assert not PurePosixPath(conf).is_relative_to("/conf")
    assert mounted_on(container, conf) in empty_dirs
    # ... and the server is told where, as zkServer.sh reads the image's ZOOCFGDIR (/conf) otherwise
    assert container["args"] == ["zkServer.sh", "start-foreground", f"{conf}/zoo.cfg"]
    # myid and snapshots, and the transaction log, on the claim: a restarted pod keeps its state
    assert mounted_on(container, env["ZOO_DATA_DIR"]) in claimed
    assert mounted_on(container, env["ZOO_DATA_LOG_DIR"]) in claimed
    assert mounted_on(container, "/tmp/hsperfdata_10000") in empty_dirs
    # the ensemble as before
    assert env["ZOO_SERVERS"].split() == [
        f"server.{i + 1}=region-a-zookeeper-{i}.region-a-zookeeper-headless:2888:3888;2181" for i in range(3)
    ]
