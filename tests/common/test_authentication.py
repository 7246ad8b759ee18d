"""The broker's authentication settings and providers, one module at a time (the end-to-end
checks with the official client are in tests/broker/e2e/test_authentication.py)."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from magnetar.common.authentication import keys, tokens
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
    with pytest.raises(AuthenticationFailed, match="unsupported Authorization scheme 'Basic'"):
        auth.authenticate_http("Basic dXNlcjpwYXNz")


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
        ClientCredentials.from_plugin("org.apache.pulsar.client.impl.auth.AuthenticationTls", "")


def test_a_broker_refuses_authorization_without_authentication() -> None:
    from magnetar.broker.config import BrokerConfig
    from magnetar.common.config import ConfigError

    with pytest.raises(ConfigError, match="authorization_enabled needs authentication_enabled"):
        BrokerConfig.load(None, {"authorization_enabled": True})
