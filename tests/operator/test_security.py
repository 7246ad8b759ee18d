"""Secure by default: a MagnetarCluster's signing key, tokens, CA and certificates are Secrets the
operator makes (owned by the resource), the pods mount them read-only and their configs name the
files; nothing secret reaches a ConfigMap, the resource, an Event or the operator's log. The
operator's admin calls carry the superuser token and trust the cluster's CA; certificates near
their expiry are re-issued; a user's TLS Secret (cert-manager's shape) is used instead."""

from __future__ import annotations

import base64
import datetime
import json
import logging
import ssl
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web
from kubernetes import client

from magnetar.bookie.config import BookieConfig
from magnetar.broker.config import BrokerConfig
from magnetar.common.authentication import keys, tokens
from magnetar.common.certificates import Certificate, CertificateError, KeyPair, issue, load_pair, new_ca
from magnetar.operator import cluster_secrets
from magnetar.operator.admin import AdminClient
from magnetar.operator.kube_api import Kube
from magnetar.operator.manifests import render_cluster
from magnetar.operator.resources import SpecError
from magnetar.operator.validation import parse_cluster
from tests.operator.conftest import condition, get_cr, wait_for, wait_for_event

CUSTOM = ("magnetar.dev", "v1alpha1")
DAY = datetime.timedelta(days=1)


def signed_by(pem: bytes, ca_pem: bytes) -> bool:
    return Certificate.load(pem).signed_by(Certificate.load(ca_pem))


def dns_names(pem: bytes) -> list[str]:
    return Certificate.load(pem).dns_names


# -- pure parts -----------------------------------------------------------------------------------
def test_the_renewal_decision() -> None:
    ca = new_ca("test CA")
    fresh = issue(ca, "b", ["b.ns.svc"])
    short = issue(ca, "b", ["b.ns.svc"], validity=10 * DAY)
    assert not Certificate.load(fresh.certificate).renewal_due(30 * DAY)
    assert Certificate.load(short.certificate).renewal_due(30 * DAY)
    assert not Certificate.load(short.certificate).renewal_due(5 * DAY)
    later = datetime.datetime.now(datetime.UTC) + 340 * DAY
    assert Certificate.load(fresh.certificate).renewal_due(30 * DAY, now=later)
    with pytest.raises(CertificateError, match="not a PEM certificate"):
        Certificate.load(b"not a certificate")


def test_why_a_generated_certificate_is_issued_again() -> None:
    ca = new_ca("test CA")
    hosts = cluster_secrets.hosts("c", "ns", "broker")
    pair = issue(ca, "magnetar-broker", hosts)
    data = {"tls.crt": pair.certificate, "tls.key": pair.key, "ca.crt": ca.certificate}
    loaded = load_pair(ca)
    assert cluster_secrets.reissue_reason(data, loaded, hosts, 30 * DAY) is None
    unreadable = {**data, "tls.crt": b"not a certificate"}
    assert cluster_secrets.reissue_reason(unreadable, loaded, hosts, 30 * DAY) == "not a PEM certificate"
    assert cluster_secrets.reissue_reason({**data, "tls.key": b""}, loaded, hosts, 30 * DAY) == "no tls.key"
    other = new_ca("another CA")
    assert "not signed" in str(cluster_secrets.reissue_reason(data, load_pair(other), hosts, 30 * DAY))
    assert "DNS names" in str(cluster_secrets.reissue_reason(data, loaded, [*hosts, "new.example"], 30 * DAY))
    wrong_key = issue(ca, "x", hosts).key
    assert "does not belong" in str(
        cluster_secrets.reissue_reason({**data, "tls.key": wrong_key}, loaded, hosts, DAY)
    )
    near = issue(ca, "magnetar-broker", hosts, validity=3 * DAY)
    near_data = {**data, "tls.crt": near.certificate, "tls.key": near.key}
    assert "within 30 days" in str(cluster_secrets.reissue_reason(near_data, loaded, hosts, 30 * DAY))
    assert "c-broker.ns.svc" in hosts
    assert "*.c-broker-headless.ns.svc" in hosts


def test_the_rendered_configs_load_in_the_components_with_the_mounted_files(tmp_path: Path) -> None:
    """The components' own models read the files the settings name: with the Secrets' contents
    where the pods mount them, broker.yaml and bookie.yaml are accepted as rendered."""
    spec = parse_cluster({"auth": {"superUserRoles": ["ops"]}}, "c")
    ca = new_ca("test CA")
    broker, bookie = (
        issue(ca, f"magnetar-{c}", cluster_secrets.hosts("c", "ns", c)) for c in ("broker", "bookie")
    )
    key = b"k" * 32
    root = tmp_path / "secrets"
    files = {
        "token-key/secret.key": key,
        "token/token": tokens.create(key, cluster_secrets.BROKER_ROLE).encode(),
        "broker/tls.crt": broker.certificate,
        "broker/tls.key": broker.key,
        "broker/ca.crt": ca.certificate,
        "bookie/tls.crt": bookie.certificate,
        "bookie/tls.key": bookie.key,
        "bookie/ca.crt": ca.certificate,
    }
    for name, content in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(content)
    maps = {o["metadata"]["name"]: o for o in render_cluster(spec, "c", "ns") if o["kind"] == "ConfigMap"}

    def local(text: str, component: str) -> dict[str, Any]:
        text = text.replace(f"{cluster_secrets.TLS_DIR}/", f"{root}/{component}/")
        loaded: dict[str, Any] = yaml.safe_load(text.replace(cluster_secrets.MOUNT, str(root)))
        return loaded

    broker_conf = BrokerConfig.model_validate(local(maps["c-broker"]["data"]["broker.yaml"], "broker"))
    assert broker_conf.authentication_enabled
    assert broker_conf.authorization_enabled
    assert broker_conf.super_users() == ["magnetar-operator", "magnetar-broker", "ops"]
    assert broker_conf.broker_client_credentials().data == files["token/token"]
    assert broker_conf.tls_server_context() is not None
    assert broker_conf.bookkeeper_tls() is not None
    assert broker_conf.broker_client_tls() is not None
    bookie_conf = BookieConfig.model_validate(local(maps["c-bookie"]["data"]["bookie.yaml"], "bookie"))
    assert bookie_conf.tls_client_authentication
    assert bookie_conf.server_tls() is not None


def test_settings_the_operator_owns_cannot_be_set_in_config() -> None:
    with pytest.raises(SpecError) as err:
        parse_cluster({"brokers": {"config": {"token_secret_key": "data:;base64,AAAA"}}}, "c")
    assert err.value.reason == "InvalidConfig"
    assert "brokers.config.token_secret_key is set by the operator" in str(err.value)
    with pytest.raises(SpecError):
        parse_cluster({"bookies": {"config": {"tls_client_authentication": False}}}, "c")
    # with TLS off, the bookie's TLS settings are the user's again
    parse_cluster(
        {"tls": {"enabled": False}, "bookies": {"config": {"tls_client_authentication": False}}}, "c"
    )


# -- against the API server ---------------------------------------------------------------------
def create_cluster(api: client.ApiClient, namespace: str, name: str, **spec: Any) -> None:
    body = {
        "apiVersion": "magnetar.dev/v1alpha1",
        "kind": "MagnetarCluster",
        "metadata": {"name": name},
        "spec": {
            "metadataStore": {"url": "zk://zk.example:2181/sec"},
            "bookies": {"replicas": 2},
            "brokers": {"replicas": 1},
            **spec,
        },
    }
    client.CustomObjectsApi(api).create_namespaced_custom_object(*CUSTOM, namespace, "magnetarclusters", body)


def ready(api: client.ApiClient, namespace: str, name: str) -> dict[str, Any] | None:
    obj = get_cr(api, "magnetarclusters", namespace, name)
    return obj if condition(obj).get("status") == "True" else None


def secrets(api: client.ApiClient, namespace: str) -> dict[str, client.V1Secret]:
    return {s.metadata.name: s for s in client.CoreV1Api(api).list_namespaced_secret(namespace).items}


def data(secret: client.V1Secret) -> dict[str, bytes]:
    return {k: base64.b64decode(v) for k, v in (secret.data or {}).items()}


def pod_spec(api: client.ApiClient, namespace: str, name: str) -> client.V1PodSpec:
    sts = client.AppsV1Api(api).read_namespaced_stateful_set(name, namespace)
    spec: client.V1PodSpec = sts.spec.template.spec
    return spec


@pytest.fixture
def debug_log(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    """Every log line of the test, the operator's thread and kopf's included, at DEBUG."""
    caplog.set_level(logging.DEBUG)
    return caplog


def test_a_cluster_gets_secrets_its_pods_mount_and_nothing_secret_leaks(
    api: client.ApiClient,
    k8s_namespace: str,
    start_operator: Callable[..., Any],
    debug_log: pytest.LogCaptureFixture,
) -> None:
    ns = k8s_namespace
    start_operator()
    create_cluster(api, ns, "sec", auth={"superUserRoles": ["ops"]})
    cluster = wait_for("sec Ready", lambda: ready(api, ns, "sec"))

    found = secrets(api, ns)
    names = cluster_secrets.secret_names("sec")
    mine = {
        names.token_key,
        names.superuser_token,
        names.broker_token,
        names.ca,
        names.broker_tls,
        names.bookie_tls,
    }
    assert mine <= set(found)
    for name in mine:
        refs = found[name].metadata.owner_references or []
        assert [(r.kind, r.uid) for r in refs] == [("MagnetarCluster", cluster["metadata"]["uid"])]
    assert found[names.broker_tls].type == "kubernetes.io/tls"
    key = data(found[names.token_key])["secret.key"]
    assert len(key) == 32
    superuser = data(found[names.superuser_token])["token"].decode()
    assert tokens.check(superuser, key).role == "magnetar-operator"
    broker_token = data(found[names.broker_token])["token"].decode()
    assert tokens.check(broker_token, key).role == "magnetar-broker"
    ca = data(found[names.ca])
    broker_tls, bookie_tls = data(found[names.broker_tls]), data(found[names.bookie_tls])
    for tls in (broker_tls, bookie_tls):
        assert set(tls) == {"tls.crt", "tls.key", "ca.crt"}
        assert tls["ca.crt"] == ca["tls.crt"]
        assert signed_by(tls["tls.crt"], ca["tls.crt"])
        load_pair(KeyPair(tls["tls.crt"], tls["tls.key"]))
    assert f"sec-broker.{ns}.svc" in dns_names(broker_tls["tls.crt"])
    assert f"*.sec-bookie.{ns}.svc" in dns_names(bookie_tls["tls.crt"])
    assert cluster["status"]["adminUrl"] == f"https://sec-broker.{ns}.svc:8443"
    assert cluster["status"]["secrets"]["superUserToken"] == names.superuser_token

    # The pods mount them read-only, 0440, run as non-root on a read-only root filesystem.
    broker, bookie = pod_spec(api, ns, "sec-broker"), pod_spec(api, ns, "sec-bookie")
    volumes = {v.name: v for v in broker.volumes}
    assert {v: volumes[v].secret.secret_name for v in ("token-key", "token", "tls")} == {
        "token-key": names.token_key,
        "token": names.broker_token,
        "tls": names.broker_tls,
    }
    assert all(volumes[v].secret.default_mode == 0o440 for v in ("token-key", "token", "tls"))
    mounts = {m.name: m for m in broker.containers[0].volume_mounts}
    assert all(mounts[v].read_only for v in ("token-key", "token", "tls", "config"))
    assert {v.name: v.secret.secret_name for v in bookie.volumes if v.secret} == {"tls": names.bookie_tls}
    for pod in (broker, bookie):
        assert pod.security_context.run_as_non_root is True
        assert pod.security_context.run_as_user == 10000
        context = pod.containers[0].security_context
        assert context.read_only_root_filesystem is True
        assert context.allow_privilege_escalation is False
    superuser_mounted = [v for p in (broker, bookie) for v in p.volumes if v.secret]
    assert names.superuser_token not in {v.secret.secret_name for v in superuser_mounted}
    assert names.ca not in {v.secret.secret_name for v in superuser_mounted}

    # The ConfigMaps name the files.
    core = client.CoreV1Api(api)
    maps = {m.metadata.name: m for m in core.list_namespaced_config_map(ns).items}
    broker_yaml = yaml.safe_load(maps["sec-broker"].data["broker.yaml"])
    assert broker_yaml["token_secret_key"] == "file:///var/run/secrets/magnetar/token-key/secret.key"
    assert (
        broker_yaml["broker_client_authentication_parameters"]
        == "file:///var/run/secrets/magnetar/token/token"
    )
    assert broker_yaml["super_user_roles"] == "magnetar-operator,magnetar-broker,ops"
    assert broker_yaml["tls_key_file_path"] == "/var/run/secrets/magnetar/tls/tls.key"
    bookie_yaml = yaml.safe_load(maps["sec-bookie"].data["bookie.yaml"])
    assert bookie_yaml["tls_client_authentication"] is True
    assert bookie_yaml["tls_key_path"] == "/var/run/secrets/magnetar/tls/tls.key"

    # Nothing secret anywhere else: ConfigMaps, the resource (status included), Events, the log.
    needles = {
        "signing key": key,
        "superuser token": superuser.encode(),
        "broker token": broker_token.encode(),
        "CA key": ca["tls.key"],
        "broker key": broker_tls["tls.key"],
        "bookie key": bookie_tls["tls.key"],
    }
    needles |= {f"{what} (base64)": base64.b64encode(v) for what, v in list(needles.items())}
    needles |= {"a PEM private key": b"PRIVATE KEY-----"}
    haystacks = {
        "ConfigMaps": json.dumps([m.data for m in maps.values()]).encode(),
        "the resource": json.dumps(get_cr(api, "magnetarclusters", ns, "sec")).encode(),
        "Events": json.dumps([e.message for e in core.list_namespaced_event(ns).items]).encode(),
        "the operator's log": "\n".join(r.getMessage() for r in debug_log.records).encode(),
    }
    assert len(debug_log.records) > 10  # the log really was captured
    leaks = [f"{what} in {where}" for what, n in needles.items() for where, h in haystacks.items() if n in h]
    assert not leaks


async def test_the_operators_admin_calls_carry_the_superuser_token_and_trust_the_ca(
    api: client.ApiClient, k8s_namespace: str
) -> None:
    """The operator's own admin client, as it is made for a managed cluster, calls a server
    serving the cluster's broker certificate: the CA is trusted and the token is the Secret's."""
    kube = Kube(api)
    spec = parse_cluster({"metadataStore": {"url": "zk://zk.example:2181/a"}}, "adm")
    owner = {"apiVersion": "magnetar.dev/v1alpha1", "kind": "MagnetarCluster",
             "metadata": {"name": "adm", "namespace": k8s_namespace, "uid": "0000-adm"}}  # fmt: skip
    keeper = cluster_secrets.Keeper(kube)
    await keeper.ensure(owner, "adm", k8s_namespace, spec)
    access = await keeper.admin_access("adm", k8s_namespace, spec)
    found = secrets(api, k8s_namespace)
    assert data(found["adm-superuser-token"])["token"].decode() not in repr(access)
    tls = data(found["adm-broker-tls"])
    seen: list[str] = []

    listeners: list[str] = []

    async def clusters(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization", ""))
        listeners.append(request.headers.get("X-Pulsar-ListenerName", ""))
        return web.json_response(["adm"])

    app = web.Application()
    app.router.add_get("/admin/v2/clusters", clusters)
    certs = Path(__import__("tempfile").mkdtemp())
    (certs / "c.pem").write_bytes(tls["tls.crt"])
    (certs / "k.pem").write_bytes(tls["tls.key"])
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(certs / "c.pem", certs / "k.pem")
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=server_ctx)
    await site.start()
    port = runner.addresses[0][1]
    try:
        # "localhost" is among the certificate's names, and the operator checks them for its own CA
        assert await AdminClient(f"https://localhost:{port}", access=access).clusters() == ["adm"]
        token = data(found["adm-superuser-token"])["token"].decode()
        assert seen == [f"Bearer {token}"]
        # the calls name the brokers' internal listener, so redirects name the pods' DNS names
        assert listeners == [cluster_secrets.INTERNAL_LISTENER]
        # without the cluster's CA the same call is refused: the trust is the Secret's CA only
        with pytest.raises(Exception, match="certificate"):
            await AdminClient(f"https://localhost:{port}").clusters()
    finally:
        await runner.cleanup()


def test_with_auth_and_tls_off_no_secrets_are_made(
    api: client.ApiClient, k8s_namespace: str, start_operator: Callable[..., Any]
) -> None:
    start_operator()
    create_cluster(api, k8s_namespace, "open", auth={"enabled": False}, tls={"enabled": False})
    cluster = wait_for("open Ready", lambda: ready(api, k8s_namespace, "open"))
    assert not [n for n in secrets(api, k8s_namespace) if n.startswith("open-")]
    assert cluster["status"]["adminUrl"] == f"http://open-broker.{k8s_namespace}.svc:8080"
    for name in ("open-broker", "open-bookie"):
        assert not [v for v in pod_spec(api, k8s_namespace, name).volumes if v.secret]
    broker_map = client.CoreV1Api(api).read_namespaced_config_map("open-broker", k8s_namespace)
    settings = yaml.safe_load(broker_map.data["broker.yaml"])
    assert "authentication_enabled" not in settings
    assert "web_service_port_tls" not in settings


def tls_secret(name: str, pair: KeyPair, ca: KeyPair, **drop: bool) -> dict[str, Any]:
    contents = {"tls.crt": pair.certificate, "tls.key": pair.key, "ca.crt": ca.certificate}
    return {
        "metadata": {"name": name},
        "type": "kubernetes.io/tls" if not drop else "Opaque",
        "data": {k: base64.b64encode(v).decode() for k, v in contents.items() if k not in drop},
    }


def test_a_tls_secret_the_user_names_is_used_instead_of_generating(
    api: client.ApiClient, k8s_namespace: str, start_operator: Callable[..., Any]
) -> None:
    ca = new_ca("cert-manager's CA")
    pair = issue(ca, "mine", cluster_secrets.hosts("mine", k8s_namespace, "broker"))
    client.CoreV1Api(api).create_namespaced_secret(k8s_namespace, tls_secret("my-tls", pair, ca))
    start_operator()
    create_cluster(api, k8s_namespace, "mine", tls={"secretName": "my-tls"})
    cluster = wait_for("mine Ready", lambda: ready(api, k8s_namespace, "mine"))
    found = set(secrets(api, k8s_namespace))
    assert not {"mine-ca", "mine-broker-tls", "mine-bookie-tls"} & found
    assert {"mine-token-key", "mine-superuser-token"} <= found  # auth still the operator's
    for name in ("mine-broker", "mine-bookie"):
        tls = next(v for v in pod_spec(api, k8s_namespace, name).volumes if v.name == "tls")
        assert tls.secret.secret_name == "my-tls"
    assert cluster["status"]["secrets"]["tls"] == "my-tls"


def test_a_second_region_signs_and_issues_with_the_first_regions_key_and_ca(
    api: client.ApiClient, k8s_namespace: str, start_operator: Callable[..., Any]
) -> None:
    """Regions that replicate to each other accept each other's brokers: the second one's tokens
    are signed by the first's key and its certificates issued by the first's CA, both used as
    they are; one naming a Secret that is not there waits, saying which."""
    ns = k8s_namespace
    op = start_operator()
    create_cluster(api, ns, "east")
    wait_for("east Ready", lambda: ready(api, ns, "east"))
    first = secrets(api, ns)
    shared = {"auth": {"signingKeySecretName": "east-token-key"}, "tls": {"caSecretName": "east-ca"}}
    create_cluster(api, ns, "west", **shared)
    create_cluster(api, ns, "south", auth={"signingKeySecretName": "absent-key"})
    wait_for("west Ready", lambda: ready(api, ns, "west"))

    found = secrets(api, ns)
    assert not {"west-token-key", "west-ca"} & set(found)  # none of its own
    key, ca = data(found["east-token-key"])["secret.key"], data(found["east-ca"])["tls.crt"]
    assert {n: found[n].metadata.resource_version for n in ("east-token-key", "east-ca")} == {
        n: first[n].metadata.resource_version for n in ("east-token-key", "east-ca")
    }, "the first region's Secrets were changed"
    assert tokens.check(data(found["west-broker-token"])["token"].decode(), key).role == "magnetar-broker"
    west_tls = data(found["west-broker-tls"])
    assert signed_by(west_tls["tls.crt"], ca)
    assert west_tls["ca.crt"] == ca
    assert f"west-broker.{ns}.svc" in dns_names(west_tls["tls.crt"])
    volumes = {v.name: v for v in pod_spec(api, ns, "west-broker").volumes}
    assert volumes["token-key"].secret.secret_name == "east-token-key"

    def waiting() -> dict[str, Any] | None:
        c = condition(get_cr(api, "magnetarclusters", ns, "south"), "Degraded")
        return c if c.get("reason") == "SharedSecretNotFound" else None

    south = wait_for("south Degraded", waiting)
    assert f"spec.auth.signingKeySecretName: Secret {ns}/absent-key does not exist" in south["message"]
    assert "south-broker" not in {
        s.metadata.name for s in client.AppsV1Api(api).list_namespaced_stateful_set(ns).items
    }
    assert op.error is None


def test_a_region_in_another_kubernetes_namespace_copies_the_key_and_issues_from_the_ca(
    api: client.ApiClient, k8s_namespace: str, start_operator: Callable[..., Any]
) -> None:
    """Two regions in two Kubernetes namespaces: a pod mounts only its own namespace's Secrets, so
    the key named as NAMESPACE/NAME is copied into the cluster's own <name>-token-key (and
    follows the source when it is rotated); the CA is only read, to issue from."""
    core, ns = client.CoreV1Api(api), k8s_namespace
    east_ns = f"{ns}-east"[:63]
    core.create_namespace({"metadata": {"name": east_ns}})
    key, ca = keys.new_secret_key(), new_ca("jp-east's CA")
    for name, contents in (("east-token-key", {"secret.key": key}), ("east-ca", _tls_data(ca))):
        encoded = {k: base64.b64encode(v).decode() for k, v in contents.items()}
        core.create_namespaced_secret(east_ns, {"metadata": {"name": name}, "data": encoded})
    start_operator(renew_interval_s=1.0)
    shared = {"signingKeySecretName": f"{east_ns}/east-token-key"}
    create_cluster(api, ns, "west", auth=shared, tls={"caSecretName": f"{east_ns}/east-ca"})
    before = wait_for("west Ready", lambda: ready(api, ns, "west"))

    found = secrets(api, ns)
    assert data(found["west-token-key"])["secret.key"] == key, "the key copied as it is"
    assert "west-ca" not in found, "no CA of its own"
    assert tokens.check(data(found["west-broker-token"])["token"].decode(), key).role == "magnetar-broker"
    west_tls = data(found["west-broker-tls"])
    assert signed_by(west_tls["tls.crt"], ca.certificate)
    assert west_tls["ca.crt"] == ca.certificate
    volumes = {v.name: v for v in pod_spec(api, ns, "west-broker").volumes}
    assert volumes["token-key"].secret.secret_name == "west-token-key"
    assert set(secrets(api, east_ns)) >= {"east-token-key", "east-ca"}

    rotated = keys.new_secret_key()
    encoded = base64.b64encode(rotated).decode()
    core.patch_namespaced_secret("east-token-key", east_ns, {"data": {"secret.key": encoded}})

    def followed() -> dict[str, Any] | None:
        obj = ready(api, ns, "west")
        revision = (obj or {}).get("status", {}).get("secretsRevision")
        copied = data(core.read_namespaced_secret("west-token-key", ns))["secret.key"]
        return obj if copied == rotated and revision != before["status"]["secretsRevision"] else None

    wait_for("the copy follows the rotated key and the pods restart onto it", followed, timeout_s=120)
    token = data(core.read_namespaced_secret("west-broker-token", ns))["token"].decode()
    assert tokens.check(token, rotated).role == "magnetar-broker", "the broker's token re-signed"


def _tls_data(ca: KeyPair) -> dict[str, bytes]:
    return {"tls.crt": ca.certificate, "tls.key": ca.key}


def test_a_tls_secret_without_its_key_is_a_clear_condition(
    api: client.ApiClient, k8s_namespace: str, start_operator: Callable[..., Any]
) -> None:
    ca = new_ca("cert-manager's CA")
    pair = issue(ca, "half", ["half.example"])
    client.CoreV1Api(api).create_namespaced_secret(
        k8s_namespace, tls_secret("half-tls", pair, ca, **{"tls.key": True})
    )
    op = start_operator()
    create_cluster(api, k8s_namespace, "half", tls={"secretName": "half-tls"})
    create_cluster(api, k8s_namespace, "nosecret", tls={"secretName": "absent-tls"})

    def degraded(name: str, reason: str) -> dict[str, Any] | None:
        c = condition(get_cr(api, "magnetarclusters", k8s_namespace, name), "Degraded")
        return c if c.get("reason") == reason else None

    half = wait_for("half Degraded", lambda: degraded("half", "InvalidTlsSecret"))
    assert half["status"] == "True"
    assert f"Secret {k8s_namespace}/half-tls has no tls.key" in half["message"]
    absent = wait_for("nosecret Degraded", lambda: degraded("nosecret", "TlsSecretNotFound"))
    assert f"Secret {k8s_namespace}/absent-tls does not exist" in absent["message"]
    wait_for_event(api, k8s_namespace, "half", "Warning", "InvalidTlsSecret")
    assert not client.AppsV1Api(api).list_namespaced_stateful_set(k8s_namespace).items
    assert op.error is None


def test_a_certificate_near_its_expiry_is_reissued_and_the_pods_restarted_onto_it(
    api: client.ApiClient, k8s_namespace: str, start_operator: Callable[..., Any]
) -> None:
    ns = k8s_namespace
    start_operator(renew_interval_s=1.0)
    create_cluster(api, ns, "renew")
    before = wait_for("renew Ready", lambda: ready(api, ns, "renew"))
    core = client.CoreV1Api(api)
    ca_data = data(core.read_namespaced_secret("renew-ca", ns))
    ca = KeyPair(ca_data["tls.crt"], ca_data["tls.key"])
    # A bookie certificate 3 days from expiry (the default renews 30 days before).
    near = issue(ca, "magnetar-bookie", cluster_secrets.hosts("renew", ns, "bookie"), validity=3 * DAY)
    core.patch_namespaced_secret(
        "renew-bookie-tls", ns, {"data": {"tls.crt": base64.b64encode(near.certificate).decode(),
                                           "tls.key": base64.b64encode(near.key).decode()}},
    )  # fmt: skip
    sts_hash = client.AppsV1Api(api).read_namespaced_stateful_set("renew-bookie", ns).spec.template.metadata

    def renewed() -> dict[str, bytes] | None:
        now = data(core.read_namespaced_secret("renew-bookie-tls", ns))
        return now if now["tls.crt"] != near.certificate else None

    fresh = wait_for("bookie certificate re-issued", renewed)
    assert not Certificate.load(fresh["tls.crt"]).renewal_due(30 * DAY)
    assert signed_by(fresh["tls.crt"], ca.certificate)
    load_pair(KeyPair(fresh["tls.crt"], fresh["tls.key"]))

    def rolled() -> dict[str, Any] | None:
        obj = ready(api, ns, "renew")
        revision = (obj or {}).get("status", {}).get("secretsRevision")
        return obj if obj and revision != before["status"]["secretsRevision"] else None

    after = wait_for("pods restarted onto the new certificate", rolled, timeout_s=120)
    new_hash = client.AppsV1Api(api).read_namespaced_stateful_set("renew-bookie", ns).spec.template.metadata
    assert (
        new_hash.annotations["magnetar.dev/config-hash"] != sts_hash.annotations["magnetar.dev/config-hash"]
    )
    wait_for_event(api, ns, "renew", "Normal", "RestartingPod")
    assert (
        after["metadata"]["annotations"][cluster_secrets.REVISION_ANNOTATION]
        == after["status"]["secretsRevision"]
    )


def test_brokers_advertise_the_listener_the_operators_calls_name_at_names_their_certificate_covers() -> None:
    """On pods a broker infers a request's listener from the address it came in at — the pod's IP
    for every request — so the operator's admin calls name the internal listener (above): its
    addresses must be the pods' DNS names, which the broker certificate names, for the redirect to
    another broker to pass the operator's host-name check (found on pods: a MagnetarBundle's
    transfer failed with "certificate is not valid for '10.244.0.5'")."""
    spec = parse_cluster({"metadataStore": {"url": "zk://zk.example:2181/a"}}, "adm")
    secured = cluster_secrets.planned(spec, "adm", "r")
    objs = render_cluster(spec, "adm", "ns1", secured)
    sts = next(o for o in objs if o["kind"] == "StatefulSet" and o["metadata"]["name"] == "adm-broker")
    env = {e["name"]: e.get("value") for e in sts["spec"]["template"]["spec"]["containers"][0]["env"]}
    listeners = env["MAGNETAR_BROKER_ADVERTISED_LISTENERS"].split(",")
    internal = [
        u.split(":", 1)[1] for u in listeners if u.startswith(f"{cluster_secrets.INTERNAL_LISTENER}:")
    ]
    assert internal == [
        "pulsar://$(POD_NAME).adm-broker-headless.ns1.svc:6650",
        "http://$(POD_NAME).adm-broker-headless.ns1.svc:8080",
        "pulsar+ssl://$(POD_NAME).adm-broker-headless.ns1.svc:6651",
        "https://$(POD_NAME).adm-broker-headless.ns1.svc:8443",
    ]
    names = list(env)
    assert names.index("POD_NAME") < names.index("MAGNETAR_BROKER_ADVERTISED_LISTENERS")  # expanded
    assert "*.adm-broker-headless.ns1.svc" in cluster_secrets.hosts("adm", "ns1", "broker")
