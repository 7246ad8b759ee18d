"""Names for producers that did not choose one, unique across brokers and restarts (Pulsar's
DistributedIdGenerator): ``{cluster}-{instance}-{n}``, where each broker start takes a new
``instance`` from a sequential node in the metadata store.

A name must not come back after a restart: a producer that reconnects keeps the name it was
given, and a new producer given the same name would be refused as already connected (or, with
deduplication, have its messages taken for that producer's)."""

from __future__ import annotations

import contextlib
import itertools

from magnetar.common.metadata import MetadataStore, NoNodeError

PATH = "/counters/producer-name"


class ProducerNames:
    def __init__(self, prefix: str, instance: int) -> None:
        self._prefix = f"{prefix}-{instance}"
        self._counter = itertools.count()

    @classmethod
    async def start(cls, store: MetadataStore, prefix: str) -> ProducerNames:
        created = await store.create(f"{PATH}/-", sequential=True)
        # The parent keeps counting: the node itself is not needed any more.
        with contextlib.suppress(NoNodeError):
            await store.delete(created)
        return cls(prefix, int(created.rsplit("-", 1)[1]))

    def __call__(self) -> str:
        return f"{self._prefix}-{next(self._counter)}"
