"""How a broker's replicators reach remote clusters and prove who they are, as Pulsar's do:

- **credentials**: the broker's own client credentials (``broker_client_authentication_plugin``
  / ``…_parameters``, Pulsar's brokerClientAuthenticationPlugin/Parameters), sent in CONNECT and
  again in AUTH_RESPONSE when a remote challenges them, read afresh each time (a token file
  renewed in place is used from the next session or challenge on);
- **TLS**: with ``broker_client_tls_enabled`` (brokerClientTlsEnabled) a remote cluster is
  reached at its ``brokerServiceUrlTls`` (``pulsar+ssl://``), its certificate checked against
  ``broker_client_trust_certs_file_path``, with ``broker_client_certificate_file_path`` /
  ``…_key_file_path`` (or the tls plugin's certificate) as the client certificate. As in Pulsar
  there is no fall-back to plain text: a remote cluster registered without a TLS URL is not
  replicated to, and the log says why.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from magnetar.common.authentication.client import ClientCredentials
from magnetar.common.tls import TlsFiles, client_context

if TYPE_CHECKING:
    from magnetar.broker.config import BrokerConfig


class RemoteAddressError(LookupError):
    """A remote cluster's record has no URL replicators can use with these settings."""


@dataclass(frozen=True)
class RemoteAccess:
    #: broker_client_authentication_plugin / _parameters (empty: anonymous)
    plugin: str = ""
    params: str = ""
    #: the broker_client_* files (config.broker_client_tls()); None: plain text
    tls: TlsFiles | None = None

    @classmethod
    def from_config(cls, config: BrokerConfig) -> RemoteAccess:
        """ValueError when the credentials cannot be read (the config checks them at start)."""
        plugin = config.broker_client_authentication_plugin
        params = config.broker_client_authentication_parameters
        credentials = ClientCredentials.from_plugin(plugin, params)
        tls = config.broker_client_tls()
        if tls is not None and not tls.certificate:  # the tls plugin's certificate, as Pulsar's
            tls = replace(tls, certificate=credentials.tls_certificate, key=credentials.tls_key)
        return cls(plugin, params, tls)

    def credentials(self) -> ClientCredentials:
        """The credentials as their parameters say now; ValueError if they cannot be read."""
        return ClientCredentials.from_plugin(self.plugin, self.params)

    def ssl_context(self) -> ssl.SSLContext | None:
        """A fresh client context for each session (renewed files are read at the next
        reconnect); None without TLS."""
        if self.tls is None:
            return None
        return client_context(self.tls.trust_certs, certificate=self.tls.certificate, key=self.tls.key)

    def service_url(self, cluster: str, data: dict[str, str]) -> str:
        """The URL of ``cluster`` (its record in the configuration store) to replicate to."""
        if self.tls is None:
            url = data.get("brokerServiceUrl", "")
            if not url:
                raise RemoteAddressError(f"cluster {cluster} has no brokerServiceUrl")
            return url
        url = data.get("brokerServiceUrlTls", "")
        if not url:
            raise RemoteAddressError(
                f"broker_client_tls_enabled is set but cluster {cluster} has no brokerServiceUrlTls "
                "(its brokers register one when they have broker_service_port_tls; or PUT "
                f"/admin/v2/clusters/{cluster} with brokerServiceUrlTls)"
            )
        return url
