"""A secured local cluster (``security: {tokens: true, tls: true}`` in the cluster file).

What it needs is made in ``<cluster dir>/security/``: with ``tokens`` a secret key and a token for
the super-user ``admin``; with ``tls`` a CA and a certificate per broker for 127.0.0.1 and
localhost. Every broker then runs with authentication (token provider) and authorization
(``admin`` the super-user), its own calls to brokers, replicators included, carrying that token
(``broker_client_authentication_*``); with ``tls`` it also serves TLS ports, and reaches other
brokers, replicators to other regions included, over TLS (``broker_client_tls_enabled``).

``client_settings`` is what the cluster state records for the lab's own clients (the workload,
probes, tests): the plugin and parameters of the super-user's credentials and the CA to trust;
``credentials`` turns that record back into the credentials a client sends.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from magnetar.common.authentication import keys, tokens
from magnetar.common.authentication.client import ClientCredentials
from magnetar.common.certificates import CertificateAuthority
from magnetar.common.ports import free_port
from magnetar.local.spec import SecuritySpec

#: the role of the lab's token: a super-user, as the brokers' own calls need
SUPER_USER = "admin"
#: the names a broker's certificate is valid for (brokers advertise 127.0.0.1)
_HOSTS = ("127.0.0.1", "localhost")
_CA_NAME = "magnetar-local-ca"


@dataclass(frozen=True)
class ClusterSecrets:
    directory: Path
    spec: SecuritySpec

    @property
    def key_file(self) -> Path:
        return self.directory / "secret.key"

    @property
    def token_file(self) -> Path:
        return self.directory / f"{SUPER_USER}.token"

    @property
    def ca_file(self) -> Path:
        return self.directory / "ca.cert.pem"

    @functools.cached_property
    def authority(self) -> CertificateAuthority:
        """The cluster's CA, made on first use; one for all the brokers' certificates, so that it
        is read and parsed once."""
        return CertificateAuthority(self.directory, name=_CA_NAME)

    @classmethod
    def make(cls, directory: Path, spec: SecuritySpec) -> ClusterSecrets:
        """The key, the super-user's token and the CA (each made once: a restart reuses them)."""
        directory.mkdir(parents=True, exist_ok=True)
        directory.chmod(0o700)
        # Absolute: the settings name these files as file:// URLs (where a relative path's first
        # part would read as a host) and processes may start elsewhere.
        secrets = cls(directory.resolve(), spec)
        if spec.tokens and not secrets.key_file.exists():
            secrets.key_file.write_bytes(keys.new_secret_key())
            secrets.key_file.chmod(0o600)
            secrets.token_file.unlink(missing_ok=True)  # signed with a key that is gone
        if spec.tokens and not secrets.token_file.exists():
            secrets.token_file.write_text(tokens.create(keys.secret_key(str(secrets.key_file)), SUPER_USER))
            secrets.token_file.chmod(0o600)
        if spec.tls:
            CertificateAuthority(directory, name=_CA_NAME)  # its files now: clients trust ca.cert.pem
        return secrets

    def broker_settings(self, broker: str) -> dict[str, Any]:
        """The settings that secure broker ``broker`` (issuing its certificate with tls)."""
        settings: dict[str, Any] = {}
        if self.spec.tokens:
            settings |= {
                "authentication_enabled": True,
                "authentication_providers": "token",
                "token_secret_key": f"file://{self.key_file}",
                "authorization_enabled": True,
                "super_user_roles": SUPER_USER,
                "broker_client_authentication_plugin": "token",
                "broker_client_authentication_parameters": f"file://{self.token_file}",
            }
        if self.spec.tls:
            settings |= self._tls_settings(broker)
        return settings

    def _tls_settings(self, broker: str) -> dict[str, Any]:
        issued = self.authority.issue(broker, broker, hosts=_HOSTS)
        return {
            # fixed when the configuration is written, so a restarted broker keeps its ports
            "broker_service_port_tls": free_port(),
            "web_service_port_tls": free_port(),
            "tls_certificate_file_path": str(issued.certificate),
            "tls_key_file_path": str(issued.key),
            "tls_trust_certs_file_path": str(self.ca_file),
            # replicators and the broker RPCs go over TLS, proving the broker's certificate
            "broker_client_tls_enabled": True,
            "broker_client_trust_certs_file_path": str(self.ca_file),
            "broker_client_certificate_file_path": str(issued.certificate),
            "broker_client_key_file_path": str(issued.key),
        }

    def client_settings(self) -> dict[str, str]:
        """What the cluster state records for the lab's clients."""
        recorded: dict[str, str] = {}
        if self.spec.tokens:
            recorded |= {"auth_plugin": "token", "auth_params": f"file://{self.token_file}"}
        if self.spec.tls:
            recorded["tls_trust_certs_file_path"] = str(self.ca_file)
        return recorded


def credentials(recorded: dict[str, str]) -> ClientCredentials:
    """The credentials of a cluster state's ``security`` record (none for an open cluster)."""
    return ClientCredentials.from_plugin(recorded.get("auth_plugin", ""), recorded.get("auth_params", ""))
