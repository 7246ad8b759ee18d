"""``magnetar standalone --secure``: token authentication and authorization turned on with what a
laptop needs made for it — a secret key and a super-user token, kept in the data directory (and
reused at the next start), the broker's own calls carrying that token."""

from __future__ import annotations

from pathlib import Path

from magnetar.common.authentication import keys, tokens

SUPER_USER = "admin"


def secure_settings(data_dir: Path) -> tuple[dict[str, object], Path]:
    """The broker settings of a secured standalone, and the super-user token's file."""
    secrets = data_dir / "security"
    secrets.mkdir(parents=True, exist_ok=True)
    secrets.chmod(0o700)
    key, token = secrets / "secret.key", secrets / f"{SUPER_USER}.token"
    if not key.exists():
        key.write_bytes(keys.new_secret_key())
        key.chmod(0o600)
        token.unlink(missing_ok=True)  # signed with a key that is gone
    if not token.exists():
        token.write_text(tokens.create(keys.secret_key(str(key)), SUPER_USER))
        token.chmod(0o600)
    settings: dict[str, object] = {
        "authentication_enabled": True,
        "authentication_providers": "token",
        "token_secret_key": f"file://{key}",
        "authorization_enabled": True,
        "super_user_roles": SUPER_USER,
        "broker_client_authentication_plugin": "token",
        "broker_client_authentication_parameters": f"file://{token}",
    }
    return settings, token


def how_to_use(token: Path, service_url: str, web_service_url: str) -> str:
    key = token.parent / "secret.key"
    return (
        f"secured: token authentication and authorization; super-user token in {token}\n"
        f"  client: pulsar.Client('{service_url}', "
        f"authentication=pulsar.AuthenticationToken(open('{token}').read()))\n"
        f"  admin:  magnetar admin --admin-url {web_service_url} --auth-plugin token "
        f"--auth-params file://{token} tenants list\n"
        f"  tokens: magnetar tokens create --secret-key file://{key} --subject app"
    )
