"""The one client of the admin REST (Pulsar's ``/admin/v2`` paths): asynchronous for the operator
and the brokers, with a blocking wrapper for ``magnetar admin``, the chaos lab's activities and
the benchmarks. Being Pulsar's paths, the same calls work against Apache Pulsar.

It follows the owner's redirects (307/308, for PUT and POST too, as Pulsar's admin does; aiohttp
itself follows them for GET only) and turns every failure into an ``AdminError`` that says what
was asked and why it failed, with the ``reason`` of Pulsar-style JSON errors.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urljoin

import aiohttp

from magnetar.common.authentication.client import ClientCredentials

#: redirects followed before giving up (an owner that moves during the call)
MAX_REDIRECTS = 5

T = TypeVar("T")


class AdminError(Exception):
    """An admin call failed; ``status`` is the HTTP status, None when the API was unreachable
    (or did not answer in time)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status

    @property
    def retriable(self) -> bool:
        """Unreachable, or the server's own trouble: the same call may succeed later."""
        return self.status is None or self.status >= 500


@dataclass(frozen=True)
class StoredMessage:
    """A message as the admin API shows it (peek, get-message-by-id, examine): its payload, and
    its metadata in ``X-Pulsar-*`` headers."""

    headers: dict[str, str]
    payload: bytes


class AsyncAdminClient:
    def __init__(
        self,
        url: str,
        *,
        timeout_s: float = 60,
        credentials: ClientCredentials | None = None,
        tls: ssl.SSLContext | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        """``tls``: how an https:// URL's certificate is checked (and the client certificate sent);
        None: against the system's CAs. ``headers``: sent with every call (as
        ``X-Pulsar-ListenerName``)."""
        self.url = url.rstrip("/")
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._auth_headers = {
            **(headers or {}),
            **(credentials.http_headers() if credentials is not None else {}),
        }
        self._ssl: ssl.SSLContext | bool = tls if tls is not None else True

    async def request(self, method: str, path: str, body: Any = None) -> Any:
        """The decoded JSON answer of ``method path`` (None for an empty one; a StoredMessage for
        a message)."""
        url = f"{self.url}{path}"
        data = None if body is None else json.dumps(body)
        headers = {"Content-Type": "application/json", "Accept": "application/json", **self._auth_headers}
        try:
            async with aiohttp.ClientSession(timeout=self._timeout) as session:
                for _ in range(MAX_REDIRECTS):
                    async with session.request(
                        method, url, data=data, headers=headers, allow_redirects=False, ssl=self._ssl
                    ) as response:
                        if response.status in (307, 308) and "Location" in response.headers:
                            url = urljoin(url, response.headers["Location"])
                            continue
                        raw = await response.read()
                        if response.status >= 300:
                            reason = _reason(raw.decode(errors="replace"))
                            raise AdminError(
                                f"{method} {path}: HTTP {response.status}: {reason}", response.status
                            )
                        if response.content_type == "application/octet-stream":
                            return StoredMessage(dict(response.headers), raw)
                        return json.loads(raw) if raw else None
        except aiohttp.ClientError as exc:
            raise AdminError(f"cannot reach the admin API at {self.url}: {exc}") from None
        except TimeoutError:
            raise AdminError(f"the admin API at {self.url} did not answer {method} {path} in time") from None
        raise AdminError(f"{method} {path}: more than {MAX_REDIRECTS} redirects")


class AdminClient:
    """The blocking wrapper: each call runs the asynchronous client to completion."""

    def __init__(
        self,
        url: str,
        timeout_s: float = 60,
        credentials: ClientCredentials | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self._client = AsyncAdminClient(url, timeout_s=timeout_s, credentials=credentials, tls=tls)

    def call(self, method: str, path: str, body: Any = None) -> Any:
        """The decoded JSON answer of ``method path`` (None for an empty one)."""
        return _run(self._client.request(method, path, body))


def _run(work: Coroutine[Any, Any, T]) -> T:
    """Run ``work`` to completion; from a thread whose event loop is running (where asyncio.run
    cannot), on a thread of its own."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(work)
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, work).result()


def _reason(text: str) -> str:
    try:
        doc = json.loads(text)
    except ValueError:
        return text.strip()[:500]
    return str(doc.get("reason", doc)) if isinstance(doc, dict) else str(doc)
