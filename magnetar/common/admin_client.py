"""A small blocking client of the admin REST API (Pulsar's ``/admin/v2`` paths), shared by
``magnetar admin``, the chaos lab's activities and the benchmarks.

It follows the owner's redirects (307/308, for PUT and POST too, as Pulsar's admin does) and turns
every failure into an ``AdminError`` that says what was asked and why it failed, with the
``reason`` of Pulsar-style JSON errors.
"""

from __future__ import annotations

import contextlib
import json
import urllib.error
import urllib.request
from typing import Any

#: redirects followed before giving up (an owner that moves during the call)
MAX_REDIRECTS = 3


class AdminError(Exception):
    """An admin call failed; ``status`` is the HTTP status (None: the API was unreachable)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class AdminClient:
    def __init__(self, url: str, timeout_s: float = 60) -> None:
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s

    def call(self, method: str, path: str, body: Any = None) -> Any:
        """The decoded JSON answer of ``method path`` (None for an empty one)."""
        url = f"{self.url}{path}"
        data = None if body is None else json.dumps(body).encode()
        for _ in range(MAX_REDIRECTS):
            request = urllib.request.Request(
                url, data=data, method=method, headers={"Content-Type": "application/json"}
            )
            try:
                with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                    text = response.read().decode()
                    return json.loads(text) if text else None
            except urllib.error.HTTPError as exc:
                if exc.code in (307, 308) and exc.headers.get("Location"):
                    url = exc.headers["Location"]
                    continue
                reason = exc.read().decode()
                with contextlib.suppress(ValueError, AttributeError):
                    reason = json.loads(reason).get("reason", reason)
                raise AdminError(f"{method} {path}: HTTP {exc.code}: {reason}", exc.code) from None
            except urllib.error.URLError as exc:
                raise AdminError(f"cannot reach the admin API at {self.url}: {exc.reason}") from None
        raise AdminError(f"{method} {path}: more than {MAX_REDIRECTS} redirects")
