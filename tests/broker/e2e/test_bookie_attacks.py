"""Three attacks on a bookie, against a topic the official client is writing.

Before: a caller of the bookie's port could replace an acknowledged entry (a Pulsar consumer was
then served the forged payload), fence the open ledger (sends went unanswered for 42 s) or set
its LAC to 10^12 (recovery closed the ledger there and no acknowledged message was readable).
Now each is refused with BookKeeper's error, the producer goes on, and after a ``kill -9`` (the
restarted broker recovers the open ledger) every acknowledged message reads back as it was sent.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import grpc
import pytest

from magnetar.bookie.digest import master_key
from magnetar.proto import bookie_pb2 as pb
from tests.bookie.helpers import Client, entry, reason_of
from tests.broker.conftest import admin_call
from tests.broker.e2e.conftest import Standalone

TOPIC = "persistent://public/default/attacked"
#: the key of Pulsar's default (empty) managed-ledger password, and no key at all
GUESSES = (master_key(b""), b"")


@pytest.fixture
async def bookie(standalone: Standalone) -> AsyncIterator[Client]:
    found = re.search(r"bookie \S+ listening on (\S+)", standalone.log_path.read_text())
    assert found, "the standalone's log names its bookie's address"
    client = Client(found.group(1))
    yield client
    await client.close()


async def _refused(call: object) -> str:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call  # type: ignore[misc]
    assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
    return reason_of(caught.value)


async def test_forged_entries_fences_and_lacs_are_refused_and_nothing_acknowledged_changes(
    standalone: Standalone, bookie: Client
) -> None:
    client = standalone.client()
    try:
        client.subscribe(TOPIC, "kept")  # holds the backlog
        producer = client.create_producer(TOPIC, batching_enabled=False, send_timeout_millis=10_000)
        sent = [f"message-{i}".encode() for i in range(15)]
        for body in sent[:5]:
            producer.send(body)
        status, stats = admin_call(
            "GET", f"{standalone.web_service_url}/admin/v2/persistent/public/default/attacked/internalStats"
        )
        assert status == 200, stats
        ledger_id = max(ledger["ledgerId"] for ledger in stats["ledgers"])

        for key in GUESSES:
            (forged,) = await bookie.add(entry(ledger_id, 0, data=b"forged"), key=key)
            assert forged.reason == pb.UNAUTHORIZED_ACCESS
            (appended,) = await bookie.add(entry(ledger_id, 5, data=b"forged"), key=key)
            assert appended.reason == pb.UNAUTHORIZED_ACCESS
            fence = pb.FenceRequest(ledger_id=ledger_id, master_key=key)
            assert await _refused(bookie.stub.Fence(fence)) == "UNAUTHORIZED_ACCESS"
            lac = pb.WriteLacRequest(ledger_id=ledger_id, last_add_confirmed=10**12, master_key=key)
            assert await _refused(bookie.stub.WriteLac(lac)) == "UNAUTHORIZED_ACCESS"

        for body in sent[5:]:  # the ledger was not fenced: every send gets its receipt
            producer.send(body)
    finally:
        client.close()
    standalone.kill()
    standalone.start()
    client = standalone.client()
    try:
        # The restarted broker recovers the ledger (fence, find its end, close it there).
        consumer = client.subscribe(TOPIC, "kept")
        received = [consumer.receive(timeout_millis=15_000).data() for _ in sent]
        assert received == sent
    finally:
        client.close()
    assert "Traceback" not in standalone.log_path.read_text()
