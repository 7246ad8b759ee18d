"""TLS on the broker's ports and the tls and basic providers, with the official client:
pulsar+ssl:// and https:// served with the broker's certificate, checked by clients against the
CA; a client that does not trust that CA, a plain-text client on the TLS port and a TLS client on
the plain port fail cleanly and leave the broker serving; a client certificate's CN is its role
(``AuthenticationTLS``, and on the admin REST); ``AuthenticationBasic`` users are checked against
bcrypt hashes; a renewed certificate is served without a restart."""

from __future__ import annotations

import json
import socket
import ssl
import time
from collections.abc import Iterator
from pathlib import Path

import pulsar
import pytest
from click.testing import CliRunner

from magnetar.admin.cli import admin
from magnetar.admin.client import AdminClient, AdminError
from magnetar.common.authentication.basic import hash_password
from magnetar.common.authentication.client import ClientCredentials
from magnetar.common.certificates import CertificateAuthority
from magnetar.common.tls import client_context
from tests.broker.e2e.conftest import Standalone, assert_workload_round_trips

TOPIC = "persistent://public/default/over-tls"
HOSTS = ("127.0.0.1", "localhost")


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA with the broker's certificate and client certificates for the roles admin, app and
    mallory; a second CA nobody trusts, with a certificate for admin."""
    directory = tmp_path_factory.mktemp("pki")
    ca = CertificateAuthority(directory / "ca")
    ca.issue("broker", "broker", hosts=HOSTS)
    for role in ("admin", "app", "mallory"):
        ca.issue(role, role)
    rogue = CertificateAuthority(directory / "rogue", name="rogue-ca")
    rogue.issue("broker", "broker", hosts=HOSTS)
    rogue.issue("admin", "admin")
    (directory / "users.htpasswd").write_text(f"# user:bcrypt\nops:{hash_password('s3cret', rounds=4)}\n")
    return directory


def _tls_settings(pki: Path, **settings: object) -> dict[str, object]:
    return {
        "broker_service_port_tls": 0,
        "web_service_port_tls": 0,
        "tls_certificate_file_path": pki / "ca" / "broker.cert.pem",
        "tls_key_file_path": pki / "ca" / "broker.key.pem",
        "tls_trust_certs_file_path": pki / "ca" / "ca.cert.pem",
        **settings,
    }


def _serve(data_dir: Path, settings: dict[str, object]) -> Iterator[Standalone]:
    server = Standalone(data_dir, **settings).start()
    yield server
    try:
        server.stop()
    finally:
        server.kill()


@pytest.fixture(scope="module")
def tls_broker(pki: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Standalone]:
    """TLS ports; no authentication."""
    yield from _serve(tmp_path_factory.mktemp("tls"), _tls_settings(pki))


@pytest.fixture(scope="module")
def authenticating(pki: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Standalone]:
    """TLS ports, the tls and basic providers, authorization with admin and ops as super-users."""
    settings = _tls_settings(
        pki,
        authentication_enabled="true",
        authentication_providers="tls,org.apache.pulsar.broker.authentication.AuthenticationProviderBasic",
        basic_auth_conf=pki / "users.htpasswd",
        authorization_enabled="true",
        # ops is the broker's own role (its calls to brokers authenticate as that basic user)
        super_user_roles="admin,ops",
        broker_client_authentication_plugin="basic",
        broker_client_authentication_parameters=json.dumps({"userId": "ops", "password": "s3cret"}),
    )
    yield from _serve(tmp_path_factory.mktemp("authenticating"), settings)


def _client(url: str, pki: Path, **options: object) -> pulsar.Client:
    settings: dict[str, object] = {
        "tls_trust_certs_file_path": str(pki / "ca" / "ca.cert.pem"),
        "operation_timeout_seconds": 5,
        "connection_timeout_ms": 3000,
        **options,
    }
    return pulsar.Client(url, **settings)  # type: ignore[arg-type]


def _round_trip(client: pulsar.Client, topic: str, count: int = 20) -> list[bytes]:
    consumer = client.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(topic)
    sent = [f"m-{i}".encode() for i in range(count)]
    for payload in sent:
        producer.send(payload)
    received = []
    for _ in sent:
        message = consumer.receive(timeout_millis=10_000)
        received.append(message.data())
        consumer.acknowledge(message)
    return received


def test_messages_go_over_pulsar_ssl_in_order(tls_broker: Standalone, pki: Path) -> None:
    assert tls_broker.service_url_tls.startswith("pulsar+ssl://")
    client = _client(tls_broker.service_url_tls, pki)
    try:
        sent = [f"m-{i}".encode() for i in range(20)]
        assert _round_trip(client, TOPIC) == sent
    finally:
        client.close()


def test_the_lookup_sends_a_tls_client_to_the_tls_port(tls_broker: Standalone, pki: Path) -> None:
    """An HTTPS lookup (the client's http lookup service) answers the owner's pulsar+ssl:// URL."""
    admin_client = AdminClient(
        tls_broker.web_service_url_tls, tls=client_context(str(pki / "ca" / "ca.cert.pem"))
    )
    answer = admin_client.call("GET", "/lookup/v2/topic/persistent/public/default/looked-up")
    assert answer["brokerUrlTls"] == tls_broker.service_url_tls
    assert answer["httpUrlTls"] == tls_broker.web_service_url_tls
    client = _client(tls_broker.web_service_url_tls, pki)  # the client's HTTP lookup over https
    try:
        client.create_producer("persistent://public/default/looked-up").send(b"found")
    finally:
        client.close()


def test_a_client_not_trusting_the_ca_is_refused(tls_broker: Standalone, pki: Path) -> None:
    client = _client(
        tls_broker.service_url_tls, pki, tls_trust_certs_file_path=str(pki / "rogue" / "ca.cert.pem")
    )
    try:
        with pytest.raises(pulsar.PulsarException):
            client.create_producer(TOPIC)
    finally:
        client.close()
    with pytest.raises(AdminError, match="certificate"):
        AdminClient(
            tls_broker.web_service_url_tls, tls=client_context(str(pki / "rogue" / "ca.cert.pem"))
        ).call("GET", "/admin/v2/tenants")


def test_plain_text_on_the_tls_port_and_tls_on_the_plain_port_fail_cleanly(
    tls_broker: Standalone, pki: Path
) -> None:
    host, port = tls_broker.service_url_tls.removeprefix("pulsar+ssl://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=15) as raw:
        raw.sendall(b"\x00\x00\x00\x0bnot-a-handshake")  # a plain-text client's first frame
        try:
            while raw.recv(4096):
                pass  # a TLS alert at most, then the broker closes the connection
        except ConnectionResetError:
            pass
        except TimeoutError:
            pytest.fail("the broker kept a plain-text client on its TLS port")
    context = client_context(str(pki / "ca" / "ca.cert.pem"))
    host, port = tls_broker.service_url.removeprefix("pulsar://").rsplit(":", 1)
    with (
        socket.create_connection((host, int(port)), timeout=15) as raw,
        pytest.raises((ssl.SSLError, ConnectionResetError, TimeoutError, OSError)),
    ):
        context.wrap_socket(raw, server_hostname=host).do_handshake()
    client = _client(tls_broker.service_url_tls, pki)
    try:
        client.create_producer(TOPIC).send(b"still serving")
    finally:
        client.close()


def test_a_client_certificate_is_its_role(authenticating: Standalone, pki: Path) -> None:
    def as_role(role: str, ca: str = "ca") -> pulsar.Client:
        authentication = pulsar.AuthenticationTLS(
            str(pki / ca / f"{role}.cert.pem"), str(pki / ca / f"{role}.key.pem")
        )
        return _client(authenticating.service_url_tls, pki, authentication=authentication)

    admin_role = as_role("admin")
    try:
        admin_role.create_producer(TOPIC).send(b"as admin")
    finally:
        admin_role.close()
    # app holds a CA-signed certificate but no grant: authenticated, then refused as app
    app = as_role("app")
    try:
        with pytest.raises(pulsar.PulsarException, match=r"(?i)authoriz|permission"):
            app.create_producer(TOPIC)
    finally:
        app.close()
    # a certificate for "admin" signed by a CA the broker does not trust proves nothing
    forged = as_role("admin", ca="rogue")
    try:
        with pytest.raises(pulsar.PulsarException):
            forged.create_producer(TOPIC)
    finally:
        forged.close()
    # on the plain port there is no certificate, so the tls method is refused
    plain = pulsar.Client(
        authenticating.service_url,
        authentication=pulsar.AuthenticationTLS(
            str(pki / "ca" / "admin.cert.pem"), str(pki / "ca" / "admin.key.pem")
        ),
        operation_timeout_seconds=5,
    )
    try:
        with pytest.raises(pulsar.PulsarException):
            plain.create_producer(TOPIC)
    finally:
        plain.close()
    text = (authenticating.log_path).read_text()
    assert "client certificate" in text, "the refusal says why"


def test_the_admin_rest_takes_client_certificates_and_basic_users(
    authenticating: Standalone, pki: Path
) -> None:
    trust = str(pki / "ca" / "ca.cert.pem")

    def rest(credentials: ClientCredentials) -> AdminClient:
        tls = client_context(trust, certificate=credentials.tls_certificate, key=credentials.tls_key)
        return AdminClient(authenticating.web_service_url_tls, credentials=credentials, tls=tls)

    as_admin = ClientCredentials.from_plugin(
        "tls", f"tlsCertFile:{pki / 'ca' / 'admin.cert.pem'},tlsKeyFile:{pki / 'ca' / 'admin.key.pem'}"
    )
    assert "public" in rest(as_admin).call("GET", "/admin/v2/tenants")
    as_app = ClientCredentials.from_plugin(
        "tls", f"tlsCertFile:{pki / 'ca' / 'app.cert.pem'},tlsKeyFile:{pki / 'ca' / 'app.key.pem'}"
    )
    with pytest.raises(AdminError, match="403"):
        rest(as_app).call("PUT", "/admin/v2/tenants/app-tenant", {"allowedClusters": []})
    ops = ClientCredentials.from_plugin("basic", json.dumps({"userId": "ops", "password": "s3cret"}))
    assert "public" in rest(ops).call("GET", "/admin/v2/tenants")
    wrong = ClientCredentials.from_plugin("basic", json.dumps({"userId": "ops", "password": "guess"}))
    with pytest.raises(AdminError, match=r"401.*wrong user or password"):
        rest(wrong).call("GET", "/admin/v2/tenants")
    # the CLI, as pulsar-admin is used
    listed = CliRunner().invoke(
        admin,
        ["--admin-url", authenticating.web_service_url_tls, "--tls-trust-certs-file-path", trust,
         "--auth-plugin", "org.apache.pulsar.client.impl.auth.AuthenticationBasic",
         "--auth-params", json.dumps({"userId": "ops", "password": "s3cret"}), "tenants", "list"],
    )  # fmt: skip
    assert listed.exit_code == 0, listed.output
    assert "public" in listed.output


def test_basic_users_with_the_official_client(authenticating: Standalone, pki: Path) -> None:
    ops = _client(
        authenticating.service_url_tls, pki, authentication=pulsar.AuthenticationBasic("ops", "s3cret")
    )
    try:
        received = _round_trip(ops, "persistent://public/default/basic-users", 5)
        assert received == [f"m-{i}".encode() for i in range(5)]
    finally:
        ops.close()
    wrong = _client(
        authenticating.service_url_tls, pki, authentication=pulsar.AuthenticationBasic("ops", "guess")
    )
    try:
        with pytest.raises(pulsar.PulsarException):
            wrong.create_producer(TOPIC)
    finally:
        wrong.close()
    assert "wrong user or password for 'ops'" in authenticating.log_path.read_text()
    assert "guess" not in authenticating.log_path.read_text(), "a password was logged"


def _served_certificate(url: str) -> bytes:
    host, port = url.split("://", 1)[1].rsplit(":", 1)
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    with (
        socket.create_connection((host, int(port)), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname=host) as wrapped,
    ):
        served = wrapped.getpeercert(binary_form=True)
    assert served is not None
    return served


def test_a_renewed_certificate_is_served_without_a_restart(pki: Path, tmp_path: Path) -> None:
    ca = CertificateAuthority(pki / "ca")
    first = ca.issue("renewed", "broker", hosts=HOSTS)
    settings = _tls_settings(
        pki,
        tls_certificate_file_path=first.certificate,
        tls_key_file_path=first.key,
        tls_cert_refresh_check_duration_sec=1,
    )
    for server in _serve(tmp_path / "renewing", settings):
        before = _served_certificate(server.service_url_tls)
        assert before == ssl.PEM_cert_to_DER_cert(first.certificate.read_text())
        client = _client(server.service_url_tls, pki)
        producer = client.create_producer(TOPIC)
        producer.send(b"before the renewal")
        ca.issue("renewed", "broker", hosts=HOSTS)  # the same files, a new certificate
        renewed = ssl.PEM_cert_to_DER_cert(first.certificate.read_text())
        deadline = time.monotonic() + 15
        while _served_certificate(server.service_url_tls) != renewed:
            assert time.monotonic() < deadline, "the renewed certificate was not served"
            time.sleep(0.5)
        assert _served_certificate(server.web_service_url_tls) == renewed
        producer.send(b"after the renewal, on the connection opened before")
        fresh = _client(server.service_url_tls, pki)
        fresh.create_producer(TOPIC).send(b"a new connection")
        fresh.close()
        client.close()


def test_the_chaos_workload_goes_over_tls_as_a_basic_user(
    authenticating: Standalone, pki: Path, tmp_path: Path
) -> None:
    """magnetar workload on pulsar+ssl:// and https:// (its partitioned topic created there),
    trusting the CA, authenticated as a basic user."""
    assert_workload_round_trips(
        tmp_path / "run",
        "--service-url", authenticating.service_url_tls, "--admin-url", authenticating.web_service_url_tls,
        "--topic", "persistent://public/default/tls-workload",
        "--tls-trust-certs-file-path", str(pki / "ca" / "ca.cert.pem"),
        "--auth-plugin", "basic", "--auth-params", json.dumps({"userId": "ops", "password": "s3cret"}),
    )  # fmt: skip
