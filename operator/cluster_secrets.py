"""A ``MagnetarCluster``'s secrets: made by the operator as Secrets (owned by the resource), mounted
into the pods as files, and used by the operator's own admin calls — never in a ConfigMap, the
resource, an Event or a log line.

With ``spec.auth`` (on by default):

- ``<cluster>-token-key``: the HS256 signing key (``secret.key``), mounted on brokers only;
- ``<cluster>-superuser-token``: a token of role ``magnetar-operator``, read by the operator for
  its admin calls and mounted nowhere;
- ``<cluster>-broker-token``: a token of role ``magnetar-broker``, the brokers' own credentials
  (``broker_client_authentication_parameters``).

With ``spec.tls`` (on by default), in cert-manager's shape (``tls.crt``, ``tls.key``, ``ca.crt``):

- ``<cluster>-ca``: the cluster's CA, mounted nowhere;
- ``<cluster>-broker-tls`` / ``<cluster>-bookie-tls``: certificates it signs for the Services'
  and pods' DNS names, re-issued ``renewBeforeDays`` before they expire;
- or, with ``spec.tls.secretName``, a Secret the user (or cert-manager) keeps, used for both.

Regions that replicate to each other must accept each other's brokers: a second region names the
first's signing key (``spec.auth.signingKeySecretName``) and CA (``spec.tls.caSecretName``),
which it uses as they are (never makes nor replaces them) to sign its tokens and issue its
certificates.

Existing Secrets are kept: a key is made once; a token no longer signed by the key, a certificate
near its expiry, not signed by the CA or not covering the names is re-issued. What the pods mount
changes the ``revision`` (made of Secret uids and certificate serials, nothing secret), which is
part of the pods' config hash, so the operator restarts them in order onto new material.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import json
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import kopf

from magnetar.common.authentication import keys, tokens
from magnetar.common.authentication.client import ClientCredentials
from magnetar.common.certificates import (
    Certificate,
    CertificateError,
    KeyPair,
    LoadedPair,
    issue,
    load_pair,
    new_ca,
)
from magnetar.operator.kube_api import Kube
from magnetar.operator.resources import ClusterSpec, SpecError

#: where the pods find the mounted Secrets
MOUNT = "/var/run/secrets/magnetar"
TLS_DIR = f"{MOUNT}/tls"
TOKEN_KEY_DIR = f"{MOUNT}/token-key"
TOKEN_DIR = f"{MOUNT}/token"
TOKEN_KEY_FILE = "secret.key"
TOKEN_FILE = "token"
#: cert-manager's keys of a TLS Secret
TLS_KEYS = ("tls.crt", "tls.key", "ca.crt")
OPERATOR_ROLE = "magnetar-operator"
BROKER_ROLE = "magnetar-broker"
#: files only their owner and the pods' group (fsGroup) may read
SECRET_MODE = 0o440
#: the CR annotation the renewal timer sets when mounted material changed (triggers a reconcile)
REVISION_ANNOTATION = "secrets.magnetar.dev/revision"


class SecretError(SpecError):
    """A Secret the cluster needs is missing or unusable; the message names it and the key, never
    a value. Waiting can help (cert-manager may not have written it yet)."""


@dataclass(frozen=True)
class SecretNames:
    token_key: str
    superuser_token: str
    broker_token: str
    ca: str
    broker_tls: str
    bookie_tls: str


def secret_names(cluster: str) -> SecretNames:
    return SecretNames(
        token_key=f"{cluster}-token-key",
        superuser_token=f"{cluster}-superuser-token",
        broker_token=f"{cluster}-broker-token",
        ca=f"{cluster}-ca",
        broker_tls=f"{cluster}-broker-tls",
        bookie_tls=f"{cluster}-bookie-tls",
    )


@dataclass(frozen=True)
class Security:
    """What the pods mount: Secret names and a revision, never a secret's value."""

    auth: bool
    #: component (``broker``, ``bookie``) -> the TLS Secret it mounts; empty: no TLS
    tls_secrets: dict[str, str] = field(default_factory=dict)
    token_key_secret: str = ""
    broker_token_secret: str = ""
    #: changes when mounted material is replaced (Secret uids, certificate serials)
    revision: str = ""

    @property
    def tls(self) -> bool:
        return bool(self.tls_secrets)


def planned(spec: ClusterSpec, cluster: str, revision: str = "") -> Security:
    """The Secrets ``spec`` makes the pods mount."""
    names = secret_names(cluster)
    tls: dict[str, str] = {}
    if spec.tls.enabled:
        user = spec.tls.secret_name
        tls = {"broker": user or names.broker_tls, "bookie": user or names.bookie_tls}
    return Security(
        auth=spec.auth.enabled,
        tls_secrets=tls,
        token_key_secret=_mounted_key(spec.auth.signing_key_secret_name, names) if spec.auth.enabled else "",
        broker_token_secret=names.broker_token if spec.auth.enabled else "",
        revision=revision,
    )


def _shared_ref(namespace: str, ref: str) -> tuple[str, str]:
    """``NAME`` (of ``namespace``) or ``NAMESPACE/NAME``: the Secret's namespace and name."""
    other, _, name = ref.rpartition("/")
    return other or namespace, name


def _copied(shared: str | None) -> bool:
    """A signing key of another namespace is copied into the cluster's own ``<name>-token-key``:
    pods mount only their own namespace's Secrets."""
    return bool(shared) and "/" in str(shared)


def _mounted_key(shared: str | None, names: SecretNames) -> str:
    return shared if shared and not _copied(shared) else names.token_key


def hosts(cluster: str, namespace: str, component: str) -> list[str]:
    """The DNS names a component's certificate covers: its Services (and the read-only brokers')
    and every pod behind their headless Services, short and fully qualified, and localhost."""
    services = [f"{cluster}-bookie"]
    pods = [f"{cluster}-bookie"]
    if component == "broker":
        services = [f"{cluster}-broker", f"{cluster}-broker-readonly"]
        pods = [f"{cluster}-broker-headless", f"{cluster}-broker-readonly-headless"]
    found = []
    for svc in services:
        found += [svc, f"{svc}.{namespace}", f"{svc}.{namespace}.svc", f"{svc}.{namespace}.svc.cluster.local"]
    for svc in pods:
        found += [f"*.{svc}.{namespace}.svc", f"*.{svc}.{namespace}.svc.cluster.local"]
    return [*dict.fromkeys(found), "localhost", "127.0.0.1"]


def reissue_reason(
    data: dict[str, bytes],
    ca: LoadedPair,
    wanted_hosts: list[str],
    renew_before: datetime.timedelta,
    *,
    now: datetime.datetime | None = None,
) -> str | None:
    """Why a generated TLS Secret's certificate must be issued again, or None when it is fine."""
    missing = [k for k in TLS_KEYS if not data.get(k)]
    if missing:
        return f"no {', '.join(missing)}"
    try:
        certificate = load_pair(KeyPair(data["tls.crt"], data["tls.key"])).certificate
    except CertificateError as exc:
        return str(exc)
    if data["ca.crt"] != ca.pair.certificate or not certificate.signed_by(ca.certificate):
        return "not signed by the cluster's CA"
    if set(certificate.dns_names) != {h for h in wanted_hosts if not h[0].isdigit()}:
        return "the DNS names changed"
    if certificate.renewal_due(renew_before, now=now):
        return f"expires {certificate.not_after:%Y-%m-%d}, within {renew_before.days} days"
    return None


def secret_manifest(
    secret: str, cluster: str, data: dict[str, bytes], *, tls: bool = False
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": secret,
            "labels": {
                "app.kubernetes.io/name": "magnetar",
                "app.kubernetes.io/instance": cluster,
                "app.kubernetes.io/component": "secrets",
                "app.kubernetes.io/managed-by": "magnetar-operator",
            },
        },
        "type": "kubernetes.io/tls" if tls else "Opaque",
        "data": {k: base64.b64encode(v).decode() for k, v in data.items()},
    }


def _tls_data(pair: KeyPair, ca: KeyPair) -> dict[str, bytes]:
    return {"tls.crt": pair.certificate, "tls.key": pair.key, "ca.crt": ca.certificate}


@dataclass(frozen=True)
class _Stored:
    name: str
    uid: str
    resource_version: str
    data: dict[str, bytes] = field(repr=False)


def _stored(obj: dict[str, Any]) -> _Stored:
    meta = obj["metadata"]
    data = {k: base64.b64decode(v) for k, v in (obj.get("data") or {}).items()}
    return _Stored(meta["name"], meta.get("uid", ""), meta.get("resourceVersion", ""), data)


@dataclass(frozen=True)
class AdminAccess:
    """How the operator's admin calls authenticate and check the brokers' certificate."""

    credentials: ClientCredentials | None = field(default=None, repr=False)
    tls: ssl.SSLContext | None = field(default=None, repr=False)
    #: the listener the calls name (``X-Pulsar-ListenerName``), so that redirects and lookups
    #: answer with the addresses the certificates name; None: the brokers' choice
    listener: str | None = None


def _trust(ca_pem: bytes, *, check_hostname: bool) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = check_hostname
    context.load_verify_locations(cadata=ca_pem.decode())
    return context


#: the listener of the brokers' pod DNS names (manifests.py), which the operator's admin calls
#: name: a broker infers a request's listener from the address it came in at, and inside a pod
#: every request, the operator's through the Service included, comes in at the pod's IP, where the
#: pod-ip listener is advertised — so it was redirected to ``https://<pod IP>:8443``, which no
#: certificate of the cluster names, and the call failed.
INTERNAL_LISTENER = "internal"


class Keeper:
    """Makes, checks and renews a cluster's Secrets; reads what the operator's admin calls need."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube

    async def ensure(self, owner: Any, cluster: str, namespace: str, spec: ClusterSpec) -> Security:
        """Every Secret ``spec`` needs, made or renewed; what the pods mount. SecretError when a
        Secret the user named cannot be used."""
        names = secret_names(cluster)
        parts: list[str] = []
        if spec.auth.enabled:
            parts += await self._auth(owner, cluster, namespace, names, spec.auth.signing_key_secret_name)
        if spec.tls.enabled:
            if spec.tls.secret_name:
                user = await self.user_tls(namespace, spec.tls.secret_name)
                parts.append(Certificate.load(user["tls.crt"]).serial)
            else:
                renew_before = datetime.timedelta(days=spec.tls.renew_before_days)
                parts += await self._tls(
                    owner, cluster, namespace, names, renew_before, spec.tls.ca_secret_name
                )
        revision = hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:16] if parts else ""
        return planned(spec, cluster, revision)

    async def _auth(
        self, owner: Any, cluster: str, namespace: str, names: SecretNames, shared: str | None
    ) -> list[str]:
        def new_key() -> dict[str, bytes]:
            return {TOKEN_KEY_FILE: keys.new_secret_key()}

        if shared:  # another cluster's key: used as it is, never made or replaced here
            stored = await self._shared(
                namespace, shared, "spec.auth.signingKeySecretName", (TOKEN_KEY_FILE,)
            )
            if _copied(shared):
                stored = await self._copy(owner, cluster, namespace, names.token_key, stored, TOKEN_KEY_FILE)
        else:
            stored = await self._get_or_create(owner, cluster, namespace, names.token_key, new_key)
            if not stored.data.get(TOKEN_KEY_FILE):
                stored = await self._replace(owner, cluster, namespace, stored, new_key())
        key = stored.data[TOKEN_KEY_FILE]
        # a copy is brought up to date in place: its version, too, says the pods need the new key
        parts = [f"{stored.uid}/{stored.resource_version}" if _copied(shared) else stored.uid]
        for secret, role in ((names.superuser_token, OPERATOR_ROLE), (names.broker_token, BROKER_ROLE)):

            def new_token(role: str = role) -> dict[str, bytes]:
                return {TOKEN_FILE: tokens.create(key, role).encode()}

            token = await self._get_or_create(owner, cluster, namespace, secret, new_token)
            if not _token_of(token.data.get(TOKEN_FILE, b""), key, role):
                token = await self._replace(owner, cluster, namespace, token, new_token())
            parts.append(f"{token.uid}/{token.resource_version}" if role == BROKER_ROLE else token.uid)
        return parts

    async def _tls(
        self,
        owner: Any,
        cluster: str,
        namespace: str,
        names: SecretNames,
        renew_before: datetime.timedelta,
        shared: str | None,
    ) -> list[str]:
        def make_ca() -> dict[str, bytes]:
            # X.509 caps a common name at 64 characters; a cluster and namespace name may be 316
            made = new_ca(f"magnetar {cluster}.{namespace} CA"[:64])
            return _tls_data(made, made)

        if shared:  # another cluster's CA: issued from, never made or replaced here
            stored = await self._shared(namespace, shared, "spec.tls.caSecretName", ("tls.crt", "tls.key"))
        else:
            stored = await self._get_or_create(owner, cluster, namespace, names.ca, make_ca, tls=True)
        try:
            # loaded once: it checks and signs both components' certificates below
            ca = load_pair(KeyPair(stored.data.get("tls.crt", b""), stored.data.get("tls.key", b"")))
        except CertificateError as exc:
            raise SecretError("InvalidSecret", f"Secret {stored.name} (the cluster's CA): {exc}") from None
        parts = [ca.certificate.serial]
        for component, secret in (("broker", names.broker_tls), ("bookie", names.bookie_tls)):
            wanted = hosts(cluster, namespace, component)

            def new_cert(component: str = component, wanted: list[str] = wanted) -> dict[str, bytes]:
                return _tls_data(issue(ca, f"magnetar-{component}", wanted), ca.pair)

            cert = await self._get_or_create(owner, cluster, namespace, secret, new_cert, tls=True)
            if reissue_reason(cert.data, ca, wanted, renew_before) is not None:
                cert = await self._replace(owner, cluster, namespace, cert, new_cert(), tls=True)
            # the check above parsed it already (unless it was just re-issued): not parsed again
            parts.append(Certificate.load(cert.data["tls.crt"]).serial)
        return parts

    async def _shared(self, namespace: str, ref: str, field: str, wanted: tuple[str, ...]) -> _Stored:
        """A Secret the spec names (another cluster's, usually; ``NAME`` or ``NAMESPACE/NAME``):
        it must exist with ``wanted``."""
        namespace, secret = _shared_ref(namespace, ref)
        found = await self.kube.secret(namespace, secret)
        if found is None:
            raise SecretError("SharedSecretNotFound", f"{field}: Secret {namespace}/{secret} does not exist")
        stored = _stored(found)
        missing = [k for k in wanted if not stored.data.get(k)]
        if missing:
            raise SecretError(
                "InvalidSecret", f"{field}: Secret {namespace}/{secret} has no {', '.join(missing)}"
            )
        return stored

    async def _copy(
        self, owner: Any, cluster: str, namespace: str, name: str, source: _Stored, key: str
    ) -> _Stored:
        """The cluster's own copy ``name`` of ``source``'s ``key``, made or brought up to date."""

        def copied() -> dict[str, bytes]:
            return {key: source.data[key]}

        stored = await self._get_or_create(owner, cluster, namespace, name, copied)
        if stored.data.get(key) != source.data[key]:
            stored = await self._replace(owner, cluster, namespace, stored, copied())
        return stored

    async def user_tls(self, namespace: str, secret: str) -> dict[str, bytes]:
        """The named TLS Secret's data, checked: cert-manager's three keys, a key that belongs to
        the certificate, a CA certificate."""
        where = f"spec.tls.secretName: Secret {namespace}/{secret}"
        found = await self.kube.secret(namespace, secret)
        if found is None:
            raise SecretError("TlsSecretNotFound", f"{where} does not exist")
        data = _stored(found).data
        missing = [k for k in TLS_KEYS if not data.get(k)]
        if missing:
            raise SecretError(
                "InvalidTlsSecret",
                f"{where} has no {', '.join(missing)} (it needs tls.crt, tls.key and ca.crt, "
                "as cert-manager writes them)",
            )
        try:
            load_pair(KeyPair(data["tls.crt"], data["tls.key"]))
        except CertificateError as exc:
            raise SecretError("InvalidTlsSecret", f"{where}: tls.crt/tls.key: {exc}") from None
        try:
            Certificate.load(data["ca.crt"])
        except CertificateError as exc:
            raise SecretError("InvalidTlsSecret", f"{where}: ca.crt: {exc}") from None
        return data

    async def admin_access(self, cluster: str, namespace: str, spec: ClusterSpec) -> AdminAccess:
        """The superuser token and the CA to trust, for a cluster the operator runs; what is not
        there yet is left out (the call then fails and is retried)."""
        if spec.external is not None:
            return AdminAccess()
        names = secret_names(cluster)
        credentials = None
        if spec.auth.enabled:
            found = await self.kube.secret(namespace, names.superuser_token)
            token = _stored(found).data.get(TOKEN_FILE, b"").strip() if found else b""
            if token:
                credentials = ClientCredentials("token", token)
        context = None
        if spec.tls.enabled:
            secret = spec.tls.secret_name or names.broker_tls
            found = await self.kube.secret(namespace, secret)
            ca_pem = _stored(found).data.get("ca.crt", b"") if found else b""
            if ca_pem:
                try:
                    # Our certificates name the Services; a user's may not (Pulsar's clients do
                    # not check names either): the chain is checked against the CA all the same.
                    context = _trust(ca_pem, check_hostname=not spec.tls.secret_name)
                except (ssl.SSLError, ValueError):
                    context = None
        return AdminAccess(credentials, context, INTERNAL_LISTENER)

    async def _get_or_create(
        self,
        owner: Any,
        cluster: str,
        namespace: str,
        secret: str,
        make: Callable[[], dict[str, bytes]],
        *,
        tls: bool = False,
    ) -> _Stored:
        found = await self.kube.secret(namespace, secret)
        if found is None:
            manifest = secret_manifest(secret, cluster, make(), tls=tls)
            kopf.adopt(manifest, owner=owner)
            found = await self.kube.create_secret(namespace, manifest)
        return _stored(found)

    async def _replace(
        self,
        owner: Any,
        cluster: str,
        namespace: str,
        stored: _Stored,
        data: dict[str, bytes],
        *,
        tls: bool = False,
    ) -> _Stored:
        manifest = secret_manifest(stored.name, cluster, data, tls=tls)
        manifest["metadata"]["resourceVersion"] = stored.resource_version  # lost updates fail
        kopf.adopt(manifest, owner=owner)
        return _stored(await self.kube.replace_secret(namespace, stored.name, manifest))


def _token_of(token: bytes, key: bytes, role: str) -> bool:
    try:
        return tokens.check(token.decode().strip(), key).role == role
    except (tokens.TokenError, UnicodeDecodeError):
        return False
