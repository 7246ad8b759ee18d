"""The Helm chart: lint, what it renders, and that the real API server accepts every object."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from magnetar.kube.control_plane import BIN, ControlPlane
from tests.operator.conftest import CRDS, ROOT

CHART = ROOT / "charts" / "magnetar"
HELM = BIN / "helm"


def helm(*args: str) -> subprocess.CompletedProcess[str]:
    if not HELM.is_file():
        pytest.skip("helm not built: run `make k8s-testenv`")
    return subprocess.run([str(HELM), *args], capture_output=True, text=True, timeout=60)


def rendered(*sets: str) -> list[dict]:  # type: ignore[type-arg]
    args = [a for s in sets for a in ("--set", s)]
    result = helm("template", "mg", str(CHART), "--namespace", "magnetar", *args)
    assert result.returncode == 0, result.stderr
    return [d for d in yaml.safe_load_all(result.stdout) if d]


def test_helm_lint_is_clean() -> None:
    result = helm("lint", "--strict", str(CHART))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 chart(s) failed" in result.stdout


def test_the_default_release_watches_every_namespace_with_cluster_wide_rules() -> None:
    objs = {(o["kind"], o["metadata"]["name"]): o for o in rendered()}
    deployment = objs[("Deployment", "mg-magnetar")]
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["args"][:3] == ["operator", "run", "--all-namespaces"]
    # Ready (what `helm install --wait` waits for) once kopf serves its health endpoint, not at
    # the container's start; probed only until then, so it adds no request a minute after.
    assert "--liveness=http://0.0.0.0:8080/healthz" in container["args"]
    assert container["startupProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert "readinessProbe" not in container
    assert deployment["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"] is True
    rules = objs[("ClusterRole", "mg-magnetar")]["rules"]
    pods = next(r for r in rules if r["resources"] == ["pods"])
    assert pods["verbs"] == ["get", "list", "watch", "delete", "patch"]  # restarts, bookies' racks
    secrets = [r for r in rules if "secrets" in r["resources"]]
    assert secrets == [
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "create", "update", "patch"]}
    ]
    assert not any("*" in r["verbs"] or "*" in r["resources"] for r in rules)
    assert ("Role", "mg-magnetar") not in objs


def test_watched_namespaces_get_roles_only_there() -> None:
    objs = rendered("watchNamespaces={prod,staging}", "replicas=2", "peering.enabled=true")
    roles = sorted(o["metadata"]["namespace"] for o in objs if o["kind"] == "Role")
    assert roles == ["prod", "staging"]
    assert not [o for o in objs if o["kind"] == "ClusterRole" and o["metadata"]["name"] == "mg-magnetar"]
    # Secrets only in the watched namespaces' Roles; the cluster-wide role reads no Secrets.
    for o in objs:
        if o["kind"] in ("Role", "ClusterRole"):
            has = any("secrets" in r["resources"] for r in o["rules"])
            assert has == (o["kind"] == "Role"), o["metadata"]["name"]
    args = next(o for o in objs if o["kind"] == "Deployment")["spec"]["template"]["spec"]["containers"][0][
        "args"
    ]
    assert {"--namespace=prod", "--namespace=staging", "--peering=magnetar"} <= set(args)
    assert sorted(o["metadata"]["namespace"] for o in objs if o["kind"] == "KopfPeering") == [
        "prod",
        "staging",
    ]


def test_replicas_without_peering_are_refused() -> None:
    result = helm("template", "mg", str(CHART), "--set", "replicas=2")
    assert result.returncode != 0
    assert "peering.enabled=true" in result.stderr


def test_the_api_server_accepts_everything_the_chart_renders(control_plane: ControlPlane) -> None:
    result = helm("template", "mg", str(CHART), "--namespace", "default", "--include-crds")
    assert result.returncode == 0, result.stderr
    crds = {
        d["metadata"]["name"]
        for d in yaml.safe_load_all(result.stdout)
        if d and d["kind"] == "CustomResourceDefinition"
    }
    assert crds == {
        d["metadata"]["name"] for p in CRDS.glob("*.yaml") for d in yaml.safe_load_all(p.read_text())
    }
    applied = control_plane.kubectl("apply", "--dry-run=server", "-f", "-", stdin=result.stdout)
    assert applied.returncode == 0, applied.stderr


def test_magnetar_operator_crds_prints_the_charts_crds() -> None:
    out = subprocess.run(
        [str(Path(ROOT / ".venv" / "bin" / "magnetar")), "operator", "crds"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    kinds = {d["spec"]["names"]["kind"] for d in yaml.safe_load_all(out.stdout) if d}
    assert {"MagnetarCluster", "MagnetarNamespace", "MagnetarBundle"} <= kinds
