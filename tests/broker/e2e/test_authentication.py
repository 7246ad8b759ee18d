"""Token authentication and authorization with the official client, a raw
socket and the admin REST: keys and tokens made with ``magnetar tokens``; a broker with
``authentication_enabled`` serves a valid token's holder, refuses a CONNECT without one or with a
forged, expired or unknown-method one with Pulsar's AuthenticationError saying why, and answers
admin calls without a Bearer token 401; its own calls to brokers carry its broker-client token.
With ``authorization_enabled``, roles produce and consume only where granted, tenant admins
administer their tenant only, and super-users everything."""

from __future__ import annotations

import base64
import json
import re
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pulsar
import pytest
from click.testing import CliRunner

from magnetar.admin.cli import admin
from magnetar.common.authentication.cli import tokens_command
from magnetar.proto import PulsarApi_pb2 as api
from tests.broker.conftest import admin_call
from tests.broker.e2e.conftest import Standalone, assert_workload_round_trips
from tests.broker.e2e.test_malformed import RawConnection

T = api.BaseCommand.Type
TOPIC = "persistent://public/default/secured"


def _tokens(*args: str) -> str:
    result = CliRunner().invoke(tokens_command, list(args))
    assert result.exit_code == 0, result.output
    return result.output.strip()


@pytest.fixture
def keys(tmp_path: Path) -> Path:
    """A secret key, tokens for the roles admin, app, ops, writer and reader, and an expired one."""
    key = tmp_path / "secret.key"
    _tokens("create-secret-key", "--output", str(key))
    for role in ("admin", "app", "ops", "writer", "reader"):
        (tmp_path / f"{role}.token").write_text(
            _tokens("create", "--secret-key", f"file://{key}", "-s", role)
        )
    expired = _tokens("create", "--secret-key", f"file://{key}", "-s", "old", "--expiry-time", "0s")
    (tmp_path / "expired.token").write_text(expired)
    return tmp_path


def _secured_standalone(keys: Path, name: str, **settings: str) -> Iterator[Standalone]:
    """A standalone checking tokens signed with the fixture's key; its own calls carry admin's."""
    server = Standalone(
        keys / name,
        authentication_enabled="true",
        token_secret_key=f"file://{keys / 'secret.key'}",
        broker_client_authentication_parameters=f"file://{keys / 'admin.token'}",
        **settings,
    ).start()
    yield server
    try:
        server.stop()
    finally:
        server.kill()


@pytest.fixture
def secured(keys: Path) -> Iterator[Standalone]:
    # Pulsar's class names for the provider and the plugin are taken as the short ones are
    yield from _secured_standalone(
        keys,
        "standalone",
        authentication_providers="org.apache.pulsar.broker.authentication.AuthenticationProviderToken",
        broker_client_authentication_plugin="org.apache.pulsar.client.impl.auth.AuthenticationToken",
    )


def _unsigned(role: str) -> bytes:
    """A token with ``alg: none``: no signature at all."""

    def part(doc: dict[str, str]) -> str:
        return base64.urlsafe_b64encode(json.dumps(doc).encode()).decode().rstrip("=")

    return f"{part({'alg': 'none', 'typ': 'JWT'})}.{part({'sub': role})}.".encode()


def _connect(server: Standalone, method: str = "", data: bytes = b"") -> api.BaseCommand:
    raw = RawConnection(server)
    raw.send(
        api.BaseCommand(
            type=T.CONNECT,
            connect=api.CommandConnect(
                client_version="raw",
                protocol_version=21,
                auth_method_name=method or None,
                auth_data=data or None,
            ),
        )
    )
    reply = raw.receive()
    assert reply is not None
    if reply.type == T.ERROR:
        assert raw.closed_after(), "a connection whose CONNECT failed is closed"
    return reply


def test_a_valid_token_is_served_and_anything_else_refused_saying_why(
    secured: Standalone, keys: Path
) -> None:
    token = (keys / "app.token").read_text()
    client = secured.client(authentication=pulsar.AuthenticationToken(token))
    consumer = client.subscribe(TOPIC, "s")
    client.create_producer(TOPIC).send(b"hello")
    assert consumer.receive(5000).data() == b"hello"
    client.close()

    assert _connect(secured, "token", token.encode()).type == T.CONNECTED
    forged = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
    for method, data, reason in [
        ("", b"", "authentication is required and none was sent"),
        ("token", forged.encode(), "signature does not match"),
        ("token", (keys / "expired.token").read_bytes(), "has expired"),
        ("token", b"not-a-jwt", "not a valid token"),
        ("basic", b"user:pass", "unknown authentication method 'basic'"),
        ("token", _unsigned("app"), "signed with an algorithm the broker's key cannot check"),
    ]:
        reply = _connect(secured, method, data)
        assert reply.type == T.ERROR, method
        assert reply.error.error == api.AuthenticationError
        assert reason in reply.error.message

    anonymous = secured.client(operation_timeout_seconds=3)
    with pytest.raises(pulsar.PulsarException):
        anonymous.create_producer(TOPIC)  # never a served topic
    anonymous.close()


def test_admin_calls_need_a_bearer_token(secured: Standalone, keys: Path) -> None:
    url = secured.web_service_url
    status, body = admin_call("GET", f"{url}/admin/v2/tenants")
    assert status == 401
    assert "authentication is required" in body["reason"]
    request = urllib.request.Request(
        f"{url}/admin/v2/tenants", headers={"Authorization": f"Bearer {(keys / 'expired.token').read_text()}"}
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 401
    assert "has expired" in json.loads(refused.value.read())["reason"]
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as response:  # open, as Pulsar's
        assert response.status == 200

    runner = CliRunner()
    base = ["--admin-url", url, "--auth-plugin", "token", "--auth-params", f"file://{keys / 'admin.token'}"]
    listed = runner.invoke(admin, [*base, "tenants", "list"])
    assert listed.exit_code == 0, listed.output
    assert "public" in listed.output
    refused_cli = runner.invoke(admin, ["--admin-url", url, "tenants", "list"])
    assert refused_cli.exit_code != 0
    assert "401" in refused_cli.output
    # Deleting a partitioned topic deletes each partition through the broker's own admin calls,
    # which carry its broker-client token.
    created = runner.invoke(admin, [*base, "topics", "create-partitioned-topic", TOPIC + "-p", "-p", "2"])
    assert created.exit_code == 0, created.output
    deleted = runner.invoke(admin, [*base, "topics", "delete-partitioned-topic", TOPIC + "-p"])
    assert deleted.exit_code == 0, deleted.output


def test_tokens_are_shown_validated_and_signed_with_key_pairs(tmp_path: Path) -> None:
    private, public = tmp_path / "private.key", tmp_path / "public.key"
    _tokens("create-key-pair", "--output-private-key", str(private), "--output-public-key", str(public))
    token = _tokens("create", "--private-key", f"file://{private}", "-s", "app", "-e", "1h")
    shown = json.loads(_tokens("show", "-i", token))
    assert shown["header"]["alg"] == "RS256"
    assert shown["claims"]["sub"] == "app"
    assert json.loads(_tokens("validate", "--public-key", str(public), "-i", token))["sub"] == "app"

    other = tmp_path / "other"
    _tokens(
        "create-key-pair",
        "--output-private-key",
        f"{other}.private",
        "--output-public-key",
        f"{other}.public",
    )
    wrong = CliRunner().invoke(tokens_command, ["validate", "--public-key", f"{other}.public", "-i", token])
    assert wrong.exit_code != 0
    assert "signature does not match" in wrong.output
    missing = CliRunner().invoke(
        tokens_command, ["create", "--secret-key", str(tmp_path / "nope"), "-s", "x"]
    )
    assert missing.exit_code != 0
    assert "cannot read key" in missing.output


@pytest.fixture
def authorized(keys: Path) -> Iterator[Standalone]:
    yield from _secured_standalone(
        keys,
        "authorized",
        authentication_providers="token",
        broker_client_authentication_plugin="token",
        authorization_enabled="true",
        super_user_roles="admin",
    )


def _as(server: Standalone, keys: Path, role: str) -> pulsar.Client:
    token = (keys / f"{role}.token").read_text()
    return server.client(authentication=pulsar.AuthenticationToken(token), operation_timeout_seconds=5)


def _admin(server: Standalone, keys: Path, role: str, *args: str) -> tuple[int, str]:
    token = f"file://{keys / f'{role}.token'}"
    result = CliRunner().invoke(
        admin,
        ["--admin-url", server.web_service_url, "--auth-plugin", "token", "--auth-params", token, *args],
    )
    return result.exit_code, result.output


def test_roles_produce_and_consume_only_where_granted(authorized: Standalone, keys: Path) -> None:
    assert _admin(authorized, keys, "admin", "tenants", "create", "acme", "--admin-roles", "ops")[0] == 0
    assert _admin(authorized, keys, "admin", "namespaces", "create", "acme/orders")[0] == 0
    topic = "persistent://acme/orders/placed"

    app = _as(authorized, keys, "app")
    with pytest.raises(pulsar.AuthorizationError):
        app.create_producer(topic)
    app.close()
    raw = RawConnection(authorized)
    raw.send(
        api.BaseCommand(
            type=T.CONNECT,
            connect=api.CommandConnect(
                client_version="raw",
                protocol_version=21,
                auth_method_name="token",
                auth_data=(keys / "app.token").read_bytes(),
            ),
        )
    )
    assert raw.receive().type == T.CONNECTED
    raw.send(
        api.BaseCommand(
            type=T.PRODUCER, producer=api.CommandProducer(topic=topic, producer_id=1, request_id=7)
        )
    )
    refused = raw.receive()
    assert refused.type == T.ERROR
    assert refused.error.error == api.AuthorizationError
    assert refused.error.message == f"role app may not produce on {topic}"

    granted = _admin(authorized, keys, "ops", "namespaces", "grant-permission", "acme/orders",
                     "--role", "app", "--actions", "produce")  # fmt: skip
    assert granted[0] == 0, granted[1]
    app = _as(authorized, keys, "app")
    app.create_producer(topic).send(b"placed")
    with pytest.raises(pulsar.AuthorizationError):
        app.subscribe(topic, "audit")
    app.close()
    assert (
        _admin(authorized, keys, "ops", "topics", "grant-permission", topic, "-r", "app", "-a", "consume")[0]
        == 0
    )
    status, shown = _admin(authorized, keys, "ops", "topics", "permissions", topic)
    assert status == 0
    assert json.loads(shown) == {"app": ["consume", "produce"]}
    app = _as(authorized, keys, "app")
    consumer = app.subscribe(topic, "audit", initial_position=pulsar.InitialPosition.Earliest)
    assert consumer.receive(5000).data() == b"placed"
    pattern = app.subscribe(re.compile("persistent://acme/orders/.*"), "by-pattern")  # a namespace grant
    pattern.close()
    app.close()
    lookup = urllib.request.Request(
        f"{authorized.web_service_url}/lookup/v2/topic/persistent/acme/orders/placed",
        headers={"Authorization": f"Bearer {(keys / 'app.token').read_text()}"},
    )
    with urllib.request.urlopen(lookup, timeout=10) as response:
        assert json.load(response)["brokerUrl"] == authorized.service_url
    # the client's HTTP lookup service asks the partition count first: a grant is enough
    over_http = pulsar.Client(
        authorized.web_service_url,
        authentication=pulsar.AuthenticationToken((keys / "app.token").read_text()),
        operation_timeout_seconds=5,
    )
    over_http.create_producer(topic).send(b"looked up over HTTP")
    over_http.close()

    assert (
        _admin(authorized, keys, "ops", "namespaces", "revoke-permission", "acme/orders", "-r", "app")[0] == 0
    )
    app = _as(authorized, keys, "app")
    with pytest.raises(pulsar.AuthorizationError):
        app.create_producer(topic)
    with pytest.raises(pulsar.PulsarException):
        app.subscribe(re.compile("persistent://acme/orders/.*"), "by-pattern")  # no namespace grant left
    app.close()
    with urllib.request.urlopen(lookup, timeout=10) as response:  # its topic grant stays
        assert response.status == 200
    elsewhere = urllib.request.Request(
        lookup.full_url.replace("placed", "shipped"), headers=dict(lookup.header_items())
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(elsewhere, timeout=10)
    assert refused.value.code == 403
    assert "role app may not produce or consume" in json.loads(refused.value.read())["reason"]


def _call_as(
    server: Standalone, keys: Path, role: str, method: str, path: str, body: object = None
) -> tuple[int, str]:
    request = urllib.request.Request(
        f"{server.web_service_url}{path}",
        data=None if body is None else json.dumps(body).encode(),
        method=method,
        headers={
            "Content-Type": "application/json",
            "Authorization": f"Bearer {(keys / f'{role}.token').read_text()}",
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_a_namespace_created_with_auth_policies_grants_them(authorized: Standalone, keys: Path) -> None:
    """The PUT that creates a namespace carries Pulsar's Policies, and its auth_policies hold at once:
    the official client's own test setup creates its token-authenticated namespace this way."""
    assert _call_as(authorized, keys, "admin", "PUT", "/admin/v2/tenants/private",
                   {"adminRoles": [], "allowedClusters": ["standalone"]})[0] == 204  # fmt: skip
    body = {
        "auth_policies": {
            "namespace_auth": {"app": ["produce", "consume"]},
            "destination_auth": {"persistent://private/auth/audit": {"reader": ["consume"]}},
            "subscription_auth_roles": {"billing": ["app"]},
        },
        "replication_clusters": ["standalone"],
    }
    assert _call_as(authorized, keys, "admin", "PUT", "/admin/v2/namespaces/private/auth", body) == (204, "")
    topic = "persistent://private/auth/orders"

    app = _as(authorized, keys, "app")
    consumer = app.subscribe(topic, "s")
    app.create_producer(topic).send(b"granted at creation")
    assert consumer.receive(5000).data() == b"granted at creation"
    app.close()
    writer = _as(authorized, keys, "writer")
    with pytest.raises(pulsar.AuthorizationError):
        writer.create_producer(topic)
    with pytest.raises(pulsar.AuthorizationError):
        writer.subscribe(topic, "s")
    writer.close()
    audit = "persistent://private/auth/audit"
    reader = _as(authorized, keys, "reader")  # a topic grant from the same body
    reader.subscribe(audit, "s").close()
    with pytest.raises(pulsar.AuthorizationError):
        reader.subscribe(topic, "s")
    with pytest.raises(pulsar.AuthorizationError):  # a subscription kept to app
        reader.subscribe(audit, "billing")
    reader.close()
    app = _as(authorized, keys, "app")
    app.subscribe(topic, "billing").close()
    app.close()
    status, shown = _admin(authorized, keys, "admin", "namespaces", "permissions", "private/auth")
    assert status == 0
    assert json.loads(shown) == {"app": ["consume", "produce"]}

    # namespaces grant-subscription-permission / revoke-subscription-permission, Pulsar's REST
    permission = "/admin/v2/namespaces/private/auth/permission/billing"
    assert _call_as(authorized, keys, "admin", "POST", permission, ["app", "reader"])[0] == 204
    reader = _as(authorized, keys, "reader")
    reader.subscribe(audit, "billing").close()
    reader.close()
    assert _call_as(authorized, keys, "admin", "DELETE", f"{permission}/reader")[0] == 204
    status, shown = _call_as(
        authorized, keys, "admin", "GET", "/admin/v2/namespaces/private/auth/permissions/subscription"
    )
    assert status == 200
    assert json.loads(shown) == {"billing": ["app"]}
    reader = _as(authorized, keys, "reader")
    with pytest.raises(pulsar.AuthorizationError):
        reader.subscribe(audit, "billing")
    reader.close()

    unknown = {"auth_policies": {"namespace_auth": {"app": ["produce", "everything"]}}}
    status, reason = _call_as(authorized, keys, "admin", "PUT", "/admin/v2/namespaces/private/other", unknown)
    assert status == 400
    assert "unknown action 'everything'" in reason


def test_tenant_admins_administer_their_tenant_and_super_users_the_rest(
    authorized: Standalone, keys: Path
) -> None:
    assert _admin(authorized, keys, "admin", "tenants", "create", "acme", "--admin-roles", "ops")[0] == 0
    assert _admin(authorized, keys, "ops", "namespaces", "create", "acme/billing")[0] == 0
    assert (
        _admin(
            authorized, keys, "ops", "namespaces", "set-retention", "acme/billing", "-s", "1G", "-t", "1d"
        )[0]
        == 0
    )
    for role, args in [
        ("ops", ["tenants", "create", "other"]),
        ("ops", ["tenants", "list"]),
        ("ops", ["namespaces", "create", "public/mine"]),
        ("ops", ["brokers", "leader-broker"]),
        ("app", ["namespaces", "list", "acme"]),
        ("app", ["namespaces", "grant-permission", "acme/billing", "-r", "app", "-a", "produce"]),
    ]:
        status, output = _admin(authorized, keys, role, *args)
        assert status != 0, (role, args)
        assert "403" in output
        assert f"role {role} may not" in output
    status, clusters = _admin(authorized, keys, "app", "clusters", "list")  # anyone may read them
    assert status == 0
    assert "standalone" in clusters
    bad = _admin(
        authorized, keys, "ops", "namespaces", "grant-permission", "acme/billing", "-r", "x", "-a", "fly"
    )
    assert bad[0] != 0
    assert "unknown action 'fly'" in bad[1]
    # the broker's own calls (a partitioned topic's deletion) carry its super-user token
    topic = "persistent://acme/billing/invoices"
    assert _admin(authorized, keys, "ops", "topics", "create-partitioned-topic", topic, "-p", "2")[0] == 0
    assert _admin(authorized, keys, "ops", "topics", "delete-partitioned-topic", topic)[0] == 0


#: what each role may do, as tested: produce, consume, read a namespace's policies, create a tenant
MATRIX = {
    "admin": (True, True, True, True),  # super-user
    "ops": (True, True, True, False),  # admin of tenant acme
    "writer": (True, False, False, False),  # granted produce on acme/m
    "reader": (False, True, False, False),  # granted consume on acme/m
    "anonymous": (False, False, False, False),  # no credentials
}


def test_the_role_action_matrix(authorized: Standalone, keys: Path) -> None:
    assert _admin(authorized, keys, "admin", "tenants", "create", "acme", "--admin-roles", "ops")[0] == 0
    assert _admin(authorized, keys, "admin", "namespaces", "create", "acme/m")[0] == 0
    for role, action in (("writer", "produce"), ("reader", "consume")):
        granted = _admin(
            authorized, keys, "ops", "namespaces", "grant-permission", "acme/m", "-r", role, "-a", action
        )
        assert granted[0] == 0, granted[1]
    topic = "persistent://acme/m/t"
    refusals: set[int] = set()

    def rest(method: str, path: str, role: str) -> bool:
        headers = (
            {} if role == "anonymous" else {"Authorization": f"Bearer {(keys / f'{role}.token').read_text()}"}
        )
        request = urllib.request.Request(
            f"{authorized.web_service_url}{path}", method=method, headers=headers
        )
        if method == "PUT":
            request.data, request.headers["Content-type"] = b"{}", "application/json"
        try:
            urllib.request.urlopen(request, timeout=10).close()
            return True
        except urllib.error.HTTPError as exc:
            refusals.add(exc.code)
            return False

    def binary(role: str, work: str) -> bool:
        if role == "anonymous":
            client = authorized.client(operation_timeout_seconds=3)
        else:
            client = _as(authorized, keys, role)
        try:
            if work == "produce":
                client.create_producer(topic).send(b"m")
            else:
                client.subscribe(topic, f"s-{role}")
            return True
        except pulsar.PulsarException:
            return False
        finally:
            client.close()

    found = {
        role: (
            binary(role, "produce"),
            binary(role, "consume"),
            rest("GET", "/admin/v2/namespaces/acme/m/retention", role),
            rest("PUT", f"/admin/v2/tenants/t-{role}", role),
        )
        for role in MATRIX
    }
    assert found == MATRIX
    assert refusals == {401, 403}, "anonymous: 401; the others: 403"


def test_a_secure_standalone_makes_its_key_super_user_token_and_certificates(tmp_path: Path) -> None:
    # free TLS ports instead of 6651 and 8443, as other tests run alongside
    flags = ("--secure", "--set", "broker_service_port_tls=0", "--set", "web_service_port_tls=0")
    server = Standalone(tmp_path / "secure", flags=flags).start()
    try:
        token_file = tmp_path / "secure" / "security" / "admin.token"
        token = token_file.read_text()
        assert json.loads(_tokens("show", "-i", token))["claims"] == {"sub": "admin"}
        client = server.client(authentication=pulsar.AuthenticationToken(token))
        client.create_producer(TOPIC).send(b"secured")
        client.close()
        ca = tmp_path / "secure" / "security" / "ca.cert.pem"
        assert server.service_url_tls.startswith("pulsar+ssl://")
        over_tls = pulsar.Client(
            server.service_url_tls,
            authentication=pulsar.AuthenticationToken(token),
            tls_trust_certs_file_path=str(ca),
            operation_timeout_seconds=15,
        )
        over_tls.create_producer(TOPIC).send(b"secured over TLS")
        over_tls.close()
        listed = CliRunner().invoke(
            admin,
            ["--admin-url", server.web_service_url_tls, "--tls-trust-certs-file-path", str(ca),
             "--auth-plugin", "token", "--auth-params", f"file://{token_file}", "tenants", "list"],
        )  # fmt: skip
        assert listed.exit_code == 0, listed.output
        anonymous = server.client(operation_timeout_seconds=3)
        with pytest.raises(pulsar.PulsarException):
            anonymous.create_producer(TOPIC)
        anonymous.close()
        server.restart()
        assert token_file.read_text() == token, "the key and token are kept across restarts"
        listed = CliRunner().invoke(
            admin,
            ["--admin-url", server.web_service_url, "--auth-plugin", "token",
             "--auth-params", f"file://{token_file}", "tenants", "list"],
        )  # fmt: skip
        assert listed.exit_code == 0, listed.output
    finally:
        server.stop()
        server.kill()


def test_the_chaos_workload_authenticates(authorized: Standalone, keys: Path, tmp_path: Path) -> None:
    assert_workload_round_trips(
        tmp_path / "run",
        "--service-url", authorized.service_url, "--admin-url", authorized.web_service_url,
        "--topic", "persistent://public/default/secured-workload",
        "--auth-plugin", "token", "--auth-params", f"file://{keys / 'admin.token'}",
    )  # fmt: skip


@pytest.fixture
def refreshing(keys: Path) -> Iterator[Standalone]:
    """Tokens checked every second for expiry (authentication_refresh_check_seconds)."""
    yield from _secured_standalone(
        keys,
        "refreshing",
        authentication_providers="token",
        broker_client_authentication_plugin="token",
        authentication_refresh_check_seconds="1",
    )


def _short_lived(keys: Path, role: str = "admin", seconds: int = 2) -> str:
    return _tokens(
        "create", "--secret-key", f"file://{keys / 'secret.key'}", "-s", role, "--expiry-time", f"{seconds}s"
    )


def test_an_expiring_token_is_refreshed_on_the_open_connection(refreshing: Standalone, keys: Path) -> None:
    """The client's token supplier is asked again at each AUTH_CHALLENGE: the producer keeps its
    connection across several expiries."""
    supplied: list[str] = []

    def supplier() -> str:
        supplied.append(_short_lived(keys))
        return supplied[-1]

    client = refreshing.client(authentication=pulsar.AuthenticationToken(supplier))
    try:
        producer = client.create_producer(TOPIC)
        producer.send(b"before")
        time.sleep(6)  # three expiries, each challenged and answered
        producer.send(b"after")
        assert len(supplied) >= 3
        log = refreshing.log_path.read_text()
        assert "credentials of role 'admin' refreshed" in log
        assert "closing connection" not in log, "the connection was closed instead of refreshed"
    finally:
        client.close()


def test_an_expired_token_not_renewed_closes_the_connection(refreshing: Standalone, keys: Path) -> None:
    token = _short_lived(keys)
    client = refreshing.client(authentication=pulsar.AuthenticationToken(token), operation_timeout_seconds=3)
    try:
        producer = client.create_producer(TOPIC, send_timeout_millis=3000)
        producer.send(b"while valid")
        deadline = time.monotonic() + 15
        while "refreshed credentials refused: the token has expired" not in refreshing.log_path.read_text():
            assert time.monotonic() < deadline, refreshing.log_path.read_text()[-2000:]
            time.sleep(0.5)
        with pytest.raises(pulsar.PulsarException):
            producer.send(b"after expiry")  # reconnecting with the expired token is refused
    finally:
        client.close()
