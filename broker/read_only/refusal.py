"""PIP-63: a read-only broker takes no producers, and its refusal says where to produce instead."""

from __future__ import annotations

import contextlib

from magnetar.broker.namespace import Namespaces
from magnetar.broker.read_only.cursor_client import CursorClient


class ProducerRefusal:
    def __init__(
        self,
        service_url: str,
        cluster: str,
        namespaces: Namespaces,
        cursors: CursorClient,
        *,
        writable_broker_service_url: str | None,
    ) -> None:
        self._service_url = service_url
        self._cluster = cluster
        self._namespaces = namespaces
        self._cursors = cursors
        self._setting = writable_broker_service_url

    async def refuse_producer(self, topic: str) -> str:
        url = await self.writable_service_url(topic)
        return (
            f"{self._service_url} is a read-only broker (PIP-63) and takes no producers: "
            f"produce to {topic} through the writable brokers at {url}"
        )

    async def writable_service_url(self, topic: str) -> str:
        """Where producers of ``topic`` go: the setting, else the topic's writable owner, else
        the cluster's broker service URL."""
        if self._setting:
            return self._setting
        with contextlib.suppress(Exception):
            owner = await self._cursors.writable_owner(topic)
            if owner is not None:
                return owner.service_url
        with contextlib.suppress(Exception):
            return (await self._namespaces.cluster(self._cluster))["brokerServiceUrl"]
        return "the writable brokers"
