"""The node's storage as `magnetar kube up` applies it (no node needed): a default StorageClass of
static local volumes bound when a pod is scheduled, and volumes whose directories any pod user can
write. tests/kube/test_operator_pods.py binds real claims to them."""

from __future__ import annotations

import json
import stat
from pathlib import Path

from magnetar.kube import volumes
from magnetar.kube.layout import NODE_NAME, Layout


def test_a_default_storage_class_and_writable_local_volumes(tmp_path: Path) -> None:
    layout = Layout(tmp_path / "state")
    items = json.loads(volumes.manifests(layout, 3))["items"]
    storage_class, *pvs = items
    assert storage_class["kind"] == "StorageClass"
    assert storage_class["metadata"]["annotations"]["storageclass.kubernetes.io/is-default-class"] == "true"
    assert storage_class["volumeBindingMode"] == "WaitForFirstConsumer"
    assert len(pvs) == 3
    for pv in pvs:
        path = Path(pv["spec"]["local"]["path"])
        assert path.parent == layout.volumes
        assert stat.S_IMODE(path.stat().st_mode) == 0o777
        assert pv["spec"]["storageClassName"] == storage_class["metadata"]["name"]
        [term] = pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
        assert term["matchExpressions"][0]["values"] == [NODE_NAME]
    assert len({pv["metadata"]["name"] for pv in pvs}) == 3
