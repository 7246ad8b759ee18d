"""The broker's authentication settings and providers, one module at a time (the end-to-end
checks with the official client are in tests/broker/e2e/test_authentication.py)."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from magnetar.common.authentication import keys, tokens
from magnetar.common.authentication.basic import hash_password
from magnetar.common.authentication.client import ClientCredentials
from magnetar.common.authentication.providers import Authentication, AuthenticationFailed


def _settings(**overrides: object) -> Authentication:
    secret = base64.b64encode(b"k" * 32).decode()
    values: dict[str, object] = {
        "enabled": True,
        "providers": ["token"],
        "token_secret_key": f"data:;base64,{secret}",
    }
    return Authentication.from_settings(**{**values, **overrides})  # type: ignore[arg-type]


def test_off_asks_nobody_and_anonymous_role_serves_callers_without_credentials() -> None:
    assert Authentication().authenticate("", b"") is None
    assert _settings(anonymous_user_role="guest").authenticate("", b"") == "guest"
    # as Pulsar's: a method no provider answers is served as the anonymous role when there is one
    assert _settings(anonymous_user_role="guest").authenticate("unknown", b"x") == "guest"
    with pytest.raises(AuthenticationFailed, match="unknown authentication method 'unknown'"):
        _settings().authenticate("unknown", b"x")
    with pytest.raises(AuthenticationFailed, match="required"):
        _settings().authenticate("", b"")


def test_a_public_key_checks_tokens_signed_with_its_private_key(tmp_path: Path) -> None:
    private, public = keys.new_key_pair("ES256")
    (tmp_path / "public.key").write_bytes(public)
    signing_key = keys.private_key("data:;base64," + base64.b64encode(private).decode())
    auth = _settings(
        token_secret_key="", token_public_key=f"file://{tmp_path / 'public.key'}", token_auth_claim="role"
    )
    signed = tokens.create(signing_key, "app", claim="role")
    assert auth.authenticate("token", signed.encode()) == "app"
    assert auth.authenticate_http(f"Bearer {signed}") == "app"
    with pytest.raises(AuthenticationFailed, match="no 'role' claim"):
        auth.authenticate(
            "token",
            tokens.create(signing_key, "x").encode(),
        )
    with pytest.raises(AuthenticationFailed, match="unknown authentication method 'basic'"):
        auth.authenticate_http("Basic dXNlcjpwYXNz")  # basic is not among this broker's providers
    with pytest.raises(AuthenticationFailed, match="unsupported Authorization scheme 'Digest'"):
        auth.authenticate_http("Digest username=app")


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"providers": ["kerberos"]}, "unknown authentication provider 'kerberos'"),
        ({"providers": []}, "needs authentication_providers"),
        ({"token_secret_key": ""}, "needs exactly one of token_secret_key and token_public_key"),
        ({"token_secret_key": "file:///nowhere/secret.key"}, "cannot read key /nowhere/secret.key"),
    ],
)
def test_settings_that_cannot_work_are_refused_naming_them(
    overrides: dict[str, object], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        _settings(**overrides)


def test_client_credentials_from_pulsar_plugin_params(tmp_path: Path) -> None:
    (tmp_path / "t").write_text("abc.def.ghi\n")
    plugin = "org.apache.pulsar.client.impl.auth.AuthenticationToken"
    assert ClientCredentials.from_plugin(plugin, "token:abc.def.ghi").data == b"abc.def.ghi"
    assert ClientCredentials.from_plugin("token", f"file://{tmp_path / 't'}").http_headers() == {
        "Authorization": "Bearer abc.def.ghi"
    }
    assert ClientCredentials.from_plugin("", "").http_headers() == {}
    with pytest.raises(ValueError, match="unsupported authentication plugin"):
        ClientCredentials.from_plugin("org.apache.pulsar.client.impl.auth.AuthenticationKerberos", "")


def test_a_broker_refuses_authorization_without_authentication() -> None:
    from magnetar.broker.config import BrokerConfig
    from magnetar.common.config import ConfigError

    with pytest.raises(ConfigError, match="authorization_enabled needs authentication_enabled"):
        BrokerConfig.load(None, {"authorization_enabled": True})


def _basic(tmp_path: Path, text: str) -> Authentication:
    (tmp_path / "users").write_text(text)
    return _settings(providers=["basic", "tls"], basic_auth_conf=str(tmp_path / "users"))


def test_basic_users_are_checked_against_their_htpasswd_hashes(tmp_path: Path) -> None:
    # admin's is Apache MD5, as pulsar-client-python's test files have it (password 123456)
    auth = _basic(
        tmp_path,
        f"# users\n\nops:{hash_password('s3cret', rounds=4)}\nadmin:$apr1$FG4AO6aX$KGYPuMoLUou3i6vUkPUUf.\n",
    )
    assert auth.authenticate("basic", b"admin:123456") == "admin"
    assert auth.authenticate("basic", b"ops:s3cret") == "ops"
    assert auth.authenticate("basic", b"ops:s3cret") == "ops"  # proven once, then remembered
    assert auth.authenticate_http("Basic " + base64.b64encode(b"ops:s3cret").decode()) == "ops"
    for data in (b"ops:wrong", b"eve:s3cret", b"ops:", b"ops"):
        with pytest.raises(AuthenticationFailed, match=r"wrong user or password|not user:password"):
            auth.authenticate("basic", data)
    with pytest.raises(AuthenticationFailed, match="not base64"):
        auth.authenticate_http("Basic !!!")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("ops\n", "line 1: not user:hash"),
        ("# comment\nops:$argon2id$v=19$m=65536,t=3,p=4$abc$def\n", "line 2: user 'ops' has a hash htpasswd"),
        ("ops:plain-text-password\n", "a hash htpasswd does not write"),
    ],
)
def test_a_basic_auth_file_that_cannot_be_used_is_refused_at_start(
    tmp_path: Path, text: str, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        _basic(tmp_path, text)


def test_the_tls_provider_takes_the_verified_certificates_cn_only() -> None:
    auth = _settings(providers=["org.apache.pulsar.broker.authentication.AuthenticationProviderTls"])
    assert auth.authenticate("tls", b"", tls_common_name="app") == "app"
    assert auth.authenticate_http(None, tls_common_name="app") == "app"
    with pytest.raises(AuthenticationFailed, match="client certificate"):
        auth.authenticate("tls", b"")
    with pytest.raises(AuthenticationFailed, match="required"):
        auth.authenticate_http(None)


@pytest.mark.parametrize(
    ("plugin", "params", "message"),
    [
        ("basic", "ops:s3cret", 'needs {"userId"'),
        ("basic", '{"userId": "a:b", "password": "x"}', "without ':'"),
        ("tls", "tlsCertFile:/c.pem", "tlsKeyFile"),
    ],
)
def test_client_plugins_say_what_their_params_lack(plugin: str, params: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ClientCredentials.from_plugin(plugin, params)
