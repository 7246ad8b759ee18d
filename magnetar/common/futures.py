"""The bridge from a callback-style hot path (``done(value, error)``) back to ``await``."""

from __future__ import annotations

import asyncio
from typing import TypeVar

T = TypeVar("T")


def settle(future: asyncio.Future[T], value: T | None, error: BaseException | None) -> None:
    """Answer ``future`` with ``value``, or with ``error`` when there is one (once: a future
    already done, cancelled by its awaiter say, is left as it is)."""
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)  # type: ignore[arg-type]
