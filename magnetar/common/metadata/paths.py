"""Path rules shared by every backend, so they all reject the same bad paths the same way."""

from __future__ import annotations


class InvalidPathError(ValueError):
    pass


def check(path: str) -> str:
    """Return ``path`` if it is absolute, has no empty or relative segments and no trailing slash."""
    if not path.startswith("/"):
        raise InvalidPathError(f"metadata path must be absolute: {path!r}")
    if path == "/":
        return path
    if path.endswith("/") or "//" in path:
        raise InvalidPathError(f"metadata path has an empty segment: {path!r}")
    if any(part in (".", "..") for part in path.split("/")):
        raise InvalidPathError(f"metadata path has a relative segment: {path!r}")
    return path


def parent(path: str) -> str:
    head = path.rsplit("/", 1)[0]
    return head or "/"


def name(path: str) -> str:
    return path.rsplit("/", 1)[1]


def join(base: str, child: str) -> str:
    return f"{base.rstrip('/')}/{child}"


def ancestors(path: str) -> list[str]:
    """Proper ancestors from the root down, excluding ``/`` itself: /a/b/c -> [/a, /a/b]."""
    parts = path.strip("/").split("/")[:-1]
    return ["/" + "/".join(parts[: i + 1]) for i in range(len(parts))]


SEQUENCE_DIGITS = 10


def sequential(path: str, counter: int) -> str:
    return f"{path}{counter:0{SEQUENCE_DIGITS}d}"
