"""Hostile bodies and names on the admin REST: every answer is JSON and below 500,
nothing is logged with a traceback, and the broker goes on serving admin calls and clients."""

from __future__ import annotations

import http.client
import json
import random
from urllib.parse import quote

from tests.broker.e2e.conftest import Standalone

NAMES = [
    "ok-name",
    "",
    " ",
    "a b",
    "a\nb",
    "a\x00b",
    "..",
    "../x",
    "é",
    "\U0001f600",
    "x" * 300,
    "a/b",
    "a\\b",
    "a%b",
    "a?b",
    "public",
    "default",
    "standalone",
]
BODIES = [
    b"",
    b"null",
    b"[]",
    b"1",
    b'"text"',
    b"{",
    b"{}",
    b"\xff\xfe",
    b'{"allowedClusters": "standalone"}',
    b'{"allowedClusters": [1, 2]}',
    b'{"allowedClusters": []}',
    b'{"bundles": {"numBundles": 1e9}}',
    b'{"bundles": {"numBundles": "4"}}',
    b'{"bundles": 4}',
    b'{"replication_clusters": "a"}',
    b'{"replicationClusters": [null]}',
    b'{"brokerServiceUrl": 5}',
    b'["standalone"]',
    b"true",
    b'{"serviceUrl": "http://x", "brokerServiceUrl": "pulsar://127.0.0.1:1"}',
]
PATHS = [
    "/admin/v2/tenants/{a}",
    "/admin/v2/clusters/{a}",
    "/admin/v2/namespaces/{a}",
    "/admin/v2/namespaces/{a}/{b}",
    "/admin/v2/namespaces/{a}/{b}/replication",
    "/admin/v2/namespaces/{a}/{b}/bundles",
    "/admin/v2/namespaces/{a}/{b}/replicatedSubscriptionsSnapshotFrequency",
    "/admin/v2/namespaces/{a}/{b}/{a}/unload",
    "/admin/v2/namespaces/{a}/{b}/0x00000000_0x40000000/split",
    "/admin/v2/persistent/{a}/{b}",
    "/admin/v2/persistent/{a}/{b}/{a}/stats",
    "/admin/v2/persistent/{a}/{b}/{a}/unload",
    "/admin/v2/brokers/{a}",
    "/lookup/v2/topic/persistent/{a}/{b}/{a}",
    "/admin/v2/persistent/{a}/{b}/{a}",
    "/admin/v2/persistent/{a}/{b}/{a}/terminate",
    "/admin/v2/persistent/{a}/{b}/{a}/lastMessageId",
    "/admin/v2/persistent/{a}/{b}/{a}/partitions",
    "/admin/v2/persistent/{a}/{b}/{a}/subscription/{b}",
    "/admin/v2/persistent/{a}/{b}/{a}/subscription/{b}/skip/{a}",
    "/admin/v2/persistent/{a}/{b}/{a}/subscription/{b}/resetcursor",
    "/admin/v2/persistent/{a}/{b}/{a}/subscription/{b}/position/{a}",
    "/admin/v2/persistent/{a}/{b}/{a}/ledger/{a}/entry/{b}",
    "/admin/v2/persistent/{a}/{b}/{a}/examinemessage?messagePosition={a}",
    "/admin/v2/persistent/{a}/{b}/{a}/messageTTL",
    "/admin/v2/persistent/{a}/{b}/{a}/backlogQuota?backlogQuotaType={a}",
    "/admin/v2/namespaces/{a}/{b}/retention",
    "/admin/v2/namespaces/{a}/{b}/publishRate",
]


def _call(standalone: Standalone, method: str, path: str, body: bytes) -> tuple[int, bytes, str]:
    connection = http.client.HTTPConnection("127.0.0.1", standalone.web_port, timeout=30)
    try:
        connection.request(method, path, body=body or None, headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        return response.status, response.read(), response.getheader("Content-Type") or ""
    finally:
        connection.close()


def test_hostile_admin_calls_get_json_errors_and_nothing_breaks(standalone: Standalone) -> None:
    rng = random.Random(22)
    answered: dict[int, int] = {}
    for _ in range(300):
        method = rng.choice(["GET", "PUT", "POST", "DELETE"])
        template = rng.choice(PATHS)
        path = template.format(a=quote(rng.choice(NAMES), safe=""), b=quote(rng.choice(NAMES), safe=""))
        body = rng.choice(BODIES)
        status, data, content_type = _call(standalone, method, path, body)
        answered[status] = answered.get(status, 0) + 1
        where = f"{method} {path} {body!r}: {status} {data[:300]!r}"
        assert status < 500 or status == 503, where
        if status >= 400:
            assert content_type.startswith("application/json"), where
            assert isinstance(json.loads(data)["reason"], str), where
    assert any(status < 300 for status in answered), answered
    assert "Traceback" not in standalone.log_path.read_text()
    # Still serving: a tenant and namespace with good names, and the official client.
    assert (
        _call(standalone, "PUT", "/admin/v2/tenants/after-fuzz", b'{"allowedClusters": ["standalone"]}')[0]
        == 204
    )
    assert _call(standalone, "PUT", "/admin/v2/namespaces/after-fuzz/ns", b"{}")[0] == 204
    client = standalone.client()
    producer = client.create_producer("persistent://after-fuzz/ns/t")
    producer.send(b"still serving")
    client.close()


def test_names_outside_pulsars_alphabet_are_refused(standalone: Standalone) -> None:
    for name in ["a b", "a\nb", "é", "\U0001f600", "x" * 300, "a\\b"]:
        status, data, _ = _call(standalone, "PUT", f"/admin/v2/tenants/{quote(name, safe='')}", b"{}")
        assert status in (400, 404, 412), (name, status, data)
        assert "reason" in json.loads(data)
    status, data, _ = _call(standalone, "PUT", "/admin/v2/tenants/acme", b'{"allowedClusters": "standalone"}')
    assert status == 400, data
    assert "allowedClusters" in json.loads(data)["reason"]
    status, data, _ = _call(standalone, "PUT", "/admin/v2/tenants/acme", b'["standalone"]')
    assert status == 400, data
    assert "JSON object" in json.loads(data)["reason"]


def test_an_over_long_path_gets_a_json_error(standalone: Standalone) -> None:
    status, data, content_type = _call(standalone, "GET", "/admin/v2/tenants/" + "x" * 9000, b"")
    assert status == 414, data[:200]
    assert content_type.startswith("application/json")
    assert "over the limit" in json.loads(data)["reason"]
    assert _call(standalone, "GET", "/admin/v2/tenants", b"")[0] == 200  # and the broker goes on
