"""``magnetar standalone --secure``: token authentication, authorization and TLS turned on with
what a laptop needs made for it — a secret key, a super-user token, a CA and the broker's
certificate, kept in the data directory (and reused at the next start), the broker's own calls
carrying that token."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from magnetar.common.authentication import keys, tokens
from magnetar.common.certificates import CertificateAuthority

if TYPE_CHECKING:
    from magnetar.broker.service import BrokerService

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
        "token_secret_key": f"file://{key}",
        "authorization_enabled": True,
        "super_user_roles": SUPER_USER,
        "broker_client_authentication_plugin": "token",
        "broker_client_authentication_parameters": f"file://{token}",
        **_tls_settings(secrets),
    }
    return settings, token


def _tls_settings(secrets: Path) -> dict[str, object]:
    """A CA of the data directory's own and the broker's certificate for this machine's names;
    clients trust ``ca.cert.pem``."""
    authority = CertificateAuthority(secrets, name="magnetar-standalone-ca")
    broker = secrets / "broker.cert.pem"
    if not broker.exists():
        authority.issue("broker", "standalone", hosts=("localhost", "127.0.0.1", "::1"))
    return {
        "broker_service_port_tls": 6651,
        "web_service_port_tls": 8443,
        "tls_certificate_file_path": str(broker),
        "tls_key_file_path": str(secrets / "broker.key.pem"),
        "tls_trust_certs_file_path": str(authority.certificate_path),
        "authentication_providers": "token,tls",
    }


def how_to_use(token: Path, broker: BrokerService) -> str:
    key, ca = token.parent / "secret.key", token.parent / "ca.cert.pem"
    lines = [
        f"secured: token and TLS authentication, authorization; super-user token in {token}",
        f"  client: pulsar.Client('{broker.service_url}', "
        f"authentication=pulsar.AuthenticationToken(open('{token}').read()))",
    ]
    if broker.service_url_tls:
        lines.append(
            f"  TLS:    pulsar.Client('{broker.service_url_tls}', tls_trust_certs_file_path='{ca}', "
            "authentication=...)"
        )
    web = broker.web_service_url_tls or broker.web_service_url
    trust = f" --tls-trust-certs-file-path {ca}" if broker.web_service_url_tls else ""
    lines += [
        f"  admin:  magnetar admin --admin-url {web}{trust} --auth-plugin token "
        f"--auth-params file://{token} tenants list",
        f"  tokens: magnetar tokens create --secret-key file://{key} --subject app",
    ]
    return "\n".join(lines)
