"""Writes made in one turn of the asyncio loop go to ZooKeeper as one multi request, as Pulsar's
metadata store batches them (``metadataStoreBatchingEnabled``, at most
``metadataStoreBatchingMaxOperations`` 1,000 operations and ``metadataStoreBatchingMaxSizeKb``
128 KB a request).

One ZooKeeper session serves a whole broker, and kazoo's one connection thread handles each
request and each answer in Python (a few hundred microseconds each on this project's 2-core
machine), so a bundle of a thousand topics moving, some fifteen writes a topic, waited on that
thread. A multi of many writes is one request and one answer for it, and one transaction for
ZooKeeper to log.

A multi is atomic: when one of its writes fails (a version conflict, a node that exists, a
missing parent: a topic's first cursor) none is applied. ZooKeeper's answer names the write that
failed, so the writes before it go again as one multi, that write goes alone (made as it would be
without batching: a missing parent is created then) and the writes after it as another multi;
one session's requests are applied in the order they are sent, so the batch's order holds and
each caller gets the answer it would have had without batching, in a few requests rather than
one a write. A multi refused as a whole is made again write by write. A write alone in its turn
goes on its own at once. Only an error that leaves the outcome unknown (the connection lost, the
session expired) is every caller's answer, as it would have been for each write sent alone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kazoo import exceptions as kx
from kazoo.client import KazooClient, TransactionRequest

from magnetar.common.metadata.kazoo_poll import Inline

#: Pulsar's metadataStoreBatchingMaxOperations and metadataStoreBatchingMaxSizeKb defaults
MAX_OPERATIONS = 1000
MAX_BYTES = 128 * 1024

#: errors after which a write's outcome is unknown or the session gone: never made again here
_UNKNOWN_OUTCOME = (kx.ConnectionLoss, kx.SessionExpiredError, kx.ConnectionClosedError)

#: starts a write on its own; returns kazoo's IAsyncResult
Single = Callable[[], Any]
#: hands a kazoo IAsyncResult's outcome to an asyncio future (errors translated for the path)
Link = Callable[[Any, str, "asyncio.Future[Any]"], None]
#: settles a future with a kazoo exception (translated for the path)
Fail = Callable[["asyncio.Future[Any]", BaseException, str], None]


@dataclass
class _Write:
    path: str
    add: Callable[[TransactionRequest], None]
    single: Single
    size: int
    future: asyncio.Future[Any] = field(repr=False)


class WriteBatches:
    def __init__(self, client: KazooClient, loop: asyncio.AbstractEventLoop, link: Link, fail: Fail) -> None:
        self._client = client
        self._loop = loop
        self._link = link
        self._fail = fail
        self._queued: list[_Write] = []

    def write(
        self, path: str, add: Callable[[TransactionRequest], None], single: Single, size: int
    ) -> asyncio.Future[Any]:
        """Queue a write: ``add`` puts it in a multi, ``single`` sends it alone; ``size``: its
        bytes (the node's data and path). The future gets what ``single``'s result would."""
        future: asyncio.Future[Any] = self._loop.create_future()
        if not self._queued:
            self._loop.call_soon(self._flush)
        self._queued.append(_Write(path, add, single, size, future))
        return future

    def _flush(self) -> None:
        # a write whose caller is gone (cancelled, or failed by the store's close) is not sent
        queued, self._queued = [w for w in self._queued if not w.future.done()], []
        batch: list[_Write] = []
        size = 0
        for write in queued:
            if batch and (len(batch) == MAX_OPERATIONS or size + write.size > MAX_BYTES):
                self._send(batch)
                batch, size = [], 0
            batch.append(write)
            size += write.size
        if batch:
            self._send(batch)

    def _send(self, batch: list[_Write]) -> None:
        if not batch:
            return
        if len(batch) == 1:
            self._alone(batch[0])
            return
        transaction = self._client.transaction()
        try:
            for write in batch:
                write.add(transaction)
        except Exception:  # a write kazoo refuses to build: each on its own, as without batching
            for write in batch:
                self._alone(write)
            return
        loop = self._loop

        def answered(result: Any) -> None:  # on kazoo's connection thread: hand it to the loop
            loop.call_soon_threadsafe(self._settle, batch, result)

        transaction.commit_async().rawlink(Inline(answered))

    def _alone(self, write: _Write) -> None:
        try:
            result = write.single()
        except Exception as exc:  # kazoo refused the arguments
            self._fail(write.future, exc, write.path)
            return
        self._link(result, write.path, write.future)

    def _settle(self, batch: list[_Write], result: Any) -> None:
        try:
            results = list(result.get_nowait())
        except _UNKNOWN_OUTCOME as exc:
            self._fail_all(batch, exc)
            return
        except kx.ZookeeperError:  # ZooKeeper refused the multi as a whole: nothing was applied
            results = []
        except Exception as exc:  # anything else: whether it was applied is unknown
            self._fail_all(batch, exc)
            return
        if len(results) == len(batch) and not any(isinstance(r, BaseException) for r in results):
            for write, value in zip(batch, results, strict=True):
                if not write.future.done():
                    write.future.set_result(value)
            return
        failed = _failed_write(results) if len(results) == len(batch) else None
        if failed is None:  # refused as a whole: each again on its own, in order
            for write in batch:
                if not write.future.done():
                    self._alone(write)
            return
        # One write failed, so none was applied: those before it again together, it alone, the
        # rest together (in that order, as sent on the one session).
        self._send([w for w in batch[:failed] if not w.future.done()])
        if not batch[failed].future.done():
            self._alone(batch[failed])
        self._send([w for w in batch[failed + 1 :] if not w.future.done()])

    def _fail_all(self, batch: list[_Write], exc: BaseException) -> None:
        for write in batch:
            if not write.future.done():
                self._fail(write.future, exc, write.path)


#: what ZooKeeper answers for the writes of a failed multi that did not fail themselves: those
#: before the failed one were undone, those after it never tried
_NOT_THE_FAILURE = (kx.RolledBackError, kx.RuntimeInconsistency)


def _failed_write(results: list[Any]) -> int | None:
    """The index of the write a failed multi failed on; None if the answer names none."""
    for i, result in enumerate(results):
        if isinstance(result, BaseException) and not isinstance(result, _NOT_THE_FAILURE):
            return i
    return None
