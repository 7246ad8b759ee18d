"""The ledger client connects to a bookie where its registration says it is now, as BookKeeper's
clients follow a bookie's BookieServiceInfo.

A bookie made again elsewhere under the same id (a pod restarted: its name, a new IP) is reached
at its new address at once: a writer that needs it as a replacement does not try its old address
first, and a writer's add to it while it is away fails at once instead of trying that address
(real ZooKeeper, real bookie processes; the old address answers nothing, as a deleted pod's IP).
A bookie that registers an IP beside its name is connected to at that IP, its certificate still
checked against the name. A ledger's recovery that finds its bookies not registered, as after a
metadata-store outage, waits for others that register again rather than failing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from magnetar.bookie.client import LedgerClient, LedgerClientConfig
from magnetar.bookie.client.ledger_handle import LedgerHandle
from magnetar.bookie.layout import WRITABLE_BOOKIES, BookieRegistration
from magnetar.bookie.server import start_bookie
from magnetar.common.metadata import open_store
from magnetar.common.metadata.store import NoNodeError
from tests.bookie.client.writer_process import payload
from tests.bookie.conftest import BookieFactory
from tests.bookie.helpers import config, make_pki

#: the id the moving bookie keeps at each of its addresses
MOVING = "moving-bookie"


class Writer:
    """Adds entries one window after another until stopped, keeping what was acknowledged."""

    def __init__(self, handle: LedgerHandle) -> None:
        self.handle = handle
        self.acked: list[int] = []
        self.failure: BaseException | None = None
        self._next = 0
        self._stop = asyncio.Event()
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        try:
            while not self._stop.is_set():
                futures = [self.handle.add_entry_async(payload(self._next + i)) for i in range(20)]
                self._next += len(futures)
                self.acked += [await f for f in futures]
        except Exception as exc:  # kept for the test's assertion, with its message
            self.failure = exc

    async def past(self, count: int) -> None:
        """Wait until ``count`` more entries were acknowledged (or the writer failed)."""
        target = len(self.acked) + count
        await until(
            lambda: _true(len(self.acked) >= target or self.failure is not None), f"{count} more adds"
        )

    async def stop(self) -> None:
        self._stop.set()
        await self._task


async def _true(value: bool) -> bool:
    return value


async def until(check: Callable[[], Awaitable[bool]], what: str, timeout_s: float = 60.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not await check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"not reached in {timeout_s}s: {what}")
        await asyncio.sleep(0.05)


@pytest.mark.zookeeper
async def test_a_bookie_restarted_at_a_new_address_is_a_replacement_at_once(
    zk_url: str, bookie_factory: BookieFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="magnetar.bookie.client")
    # Two bookies first, so the ledger's ensemble is theirs and the client connects to the moving
    # one where it is at first.
    steady = await bookie_factory.start_async(zk_url, "steady")
    moving = await bookie_factory.start_async(zk_url, "moving", bookie_id=MOVING)
    store = await open_store(zk_url)
    client = LedgerClient(store, LedgerClientConfig(ensemble_size=2, write_quorum=2, ack_quorum=2))
    dead: socket.socket | None = None
    try:
        writer = Writer(await client.create_ledger())
        idle = await client.create_ledger()  # no add in flight when the bookie goes
        assert await idle.add_entry_async(b"before") == 0
        await writer.past(100)
        spare = await bookie_factory.start_async(zk_url, "spare")

        # The moving bookie stops, as a pod deleted does; the writer replaces it with the spare.
        old_address = moving.address
        await moving.stop_async()
        await until(
            lambda: _true(
                MOVING not in writer.handle.metadata.ensembles[-1][1] or writer.failure is not None
            ),
            "the stopped bookie replaced",
        )
        await writer.past(100)
        # Its old address now takes connections and answers nothing, as a deleted pod's IP does
        # (where a connection attempt waits out its timeout).
        host, port = old_address.rsplit(":", 1)
        dead = socket.socket()
        dead.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        dead.bind((host, int(port)))
        dead.listen(16)
        dead.setblocking(False)

        async def unregistered() -> bool:
            return await store.exists(f"{WRITABLE_BOOKIES}/{MOVING}") is None

        await until(unregistered, "the stopped bookie unregistered")
        # The idle writer's next add: the bookie is not registered, so it is replaced at once.
        assert await asyncio.wait_for(idle.add_entry_async(b"after"), 60) == 1
        assert MOVING not in idle.metadata.ensembles[-1][1]

        # It comes back under its id at another address and port, as a pod made again does.
        moving.port = 0
        moving.settings["listen_address"] = "127.0.0.2"
        await moving.start_async()
        assert moving.address != old_address
        assert moving.bookie_id == MOVING

        async def registered_anew() -> bool:
            try:
                data, _ = await store.get(f"{WRITABLE_BOOKIES}/{MOVING}")
            except NoNodeError:
                return False
            return BookieRegistration.decode(data).address == moving.address

        await until(registered_anew, "the bookie registered at its new address")
        # Now the spare stops: the moving bookie is the only replacement there is.
        await spare.stop_async()
        await until(
            lambda: _true(MOVING in writer.handle.metadata.ensembles[-1][1] or writer.failure is not None),
            "the moving bookie back in the ensemble",
        )
        await writer.past(100)
        await writer.stop()

        assert writer.failure is None, f"the writer stopped: {writer.failure!r}"
        assert writer.acked == list(range(len(writer.acked))), "adds complete in order, none failed"
        assert set(writer.handle.metadata.ensembles[-1][1]) == {steady.bookie_id, MOVING}
        passed_over = [r.getMessage() for r in caplog.records if "does not connect" in r.getMessage()]
        assert not passed_over, f"a replacement was tried at its old address: {passed_over}"
        connection = client.pool.cached(MOVING)
        assert connection is not None
        assert connection.moves == 1, "the connection followed it once"
        await writer.handle.close()
        reader = await client.open_ledger_no_recovery(writer.handle.ledger_id)
        last = len(writer.acked) - 1
        assert [e.payload for e in await reader.read(0, last)] == [payload(i) for i in range(last + 1)]
        try:
            attempt, _ = dead.accept()
        except BlockingIOError:
            attempt = None
        assert attempt is None, "the client connected to the bookie's old address"
    finally:
        await client.close()
        await store.close()
        if dead is not None:
            with contextlib.suppress(OSError):
                dead.close()


async def test_a_registered_ip_is_connected_to_with_tls_checking_the_name(
    tmp_path: Path, memory_url: str
) -> None:
    # The bookie serves on 127.0.0.2 only; its name, localhost, resolves to 127.0.0.1, where
    # nothing listens, and its certificate names localhost, not 127.0.0.2: adds and reads work only
    # at the registered IP with the certificate checked against the name.
    pki = make_pki(tmp_path / "pki")
    settings = {
        "metadata_service_uri": memory_url,
        "listen_address": "127.0.0.2",
        "advertised_address": "localhost",
        "advertised_ip": "127.0.0.2",
        **pki.bookie_settings(),
    }
    server = await start_bookie(config(tmp_path / "bookie", **settings))
    store = await open_store(memory_url)
    client = LedgerClient(
        store,
        LedgerClientConfig(
            ensemble_size=1, write_quorum=1, ack_quorum=1, rpc_timeout_s=5, tls=pki.client(pki.broker)
        ),
    )
    try:
        registration = await client.directory.registration(server.bookie_id)
        assert registration is not None
        assert (registration.address.split(":")[0], registration.ip) == ("localhost", "127.0.0.2")
        writer = await client.create_ledger()
        assert [await writer.add_entry_async(payload(i)) for i in range(50)] == list(range(50))
        await writer.close()
        assert server.bookie.stats.add_requests["framed"] > 0, "adds went over the add port, by IP"
        reader = await client.open_ledger_no_recovery(writer.ledger_id)
        assert [e.payload for e in await reader.read(0, 49)] == [payload(i) for i in range(50)]
    finally:
        await client.close()
        await store.close()
        await server.stop()


@pytest.mark.zookeeper
async def test_a_recovery_waits_for_bookies_registering_again_after_their_sessions_expired(
    zk_url: str, bookie_factory: BookieFactory, caplog: pytest.LogCaptureFixture
) -> None:
    """After a metadata-store outage every bookie's session expires, and each registers again
    moments after the store returns. A topic loading in those moments recovers its ledger: the
    recovery's adds find the ensemble's bookies not registered, and it waits for another bookie
    to register instead of failing (which stopped the topic's publishing until a client's retry)."""
    caplog.set_level(logging.INFO, logger="magnetar.bookie.client")
    bookies = [await bookie_factory.start_async(zk_url, f"b{i}") for i in range(4)]
    store = await open_store(zk_url)
    config = LedgerClientConfig(ensemble_size=2, write_quorum=2, ack_quorum=2, new_ensemble_wait_s=60)
    async with LedgerClient(store, config) as writer_client, LedgerClient(store, config) as recovering:
        writer = await writer_client.create_ledger()
        for i in range(50):
            assert await writer.add_entry_async(payload(i)) == i
        registrations = {}
        for bookie in bookies:  # their sessions expired: the ephemeral nodes are gone
            path = f"{WRITABLE_BOOKIES}/{bookie.bookie_id}"
            registrations[bookie.bookie_id] = (await store.get(path))[0]
            await store.delete(path)
        await until(_none_writable(recovering), "the recovering client sees no writable bookie")

        recovery = asyncio.create_task(recovering.open_ledger(writer.ledger_id))
        await until(
            lambda: _true(
                any("waiting for bookies" in r.getMessage() for r in caplog.records) or recovery.done()
            ),
            "the recovery waiting for bookies",
        )
        assert not recovery.done(), f"the recovery gave up: {recovery.exception()!r}"
        others = [b for b in registrations if b not in writer.metadata.ensembles[-1][1]]
        for bookie_id in others:  # the others register again, as after a session expiry
            await store.create(f"{WRITABLE_BOOKIES}/{bookie_id}", registrations[bookie_id], ephemeral=True)
        reader = await asyncio.wait_for(recovery, 60)

        assert reader.last_add_confirmed == 49, "recovered and closed at the last acknowledged entry"
        assert [e.payload for e in await reader.read(0, 49)] == [payload(i) for i in range(50)]
        assert set(reader.metadata.ensembles[-1][1]) <= set(others), "the replacements wrote the rest"
    await store.close()


def _none_writable(client: LedgerClient) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return not await client.directory.writable()

    return check
