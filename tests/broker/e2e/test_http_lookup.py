"""The official client given the broker's http:// URL (HTTP lookups, as with Pulsar's web service
URL), and namespaces that hold topics kept from deletion."""

from __future__ import annotations

import http.client
import json

import pulsar

from tests.broker.e2e.conftest import Standalone


def _call(standalone: Standalone, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", standalone.web_port, timeout=30)
    try:
        connection.request(method, path, body=body or None, headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def test_the_official_client_produces_and_consumes_through_an_http_service_url(
    standalone: Standalone,
) -> None:
    client = pulsar.Client(standalone.web_service_url, operation_timeout_seconds=15)
    try:
        consumer = client.subscribe("persistent://public/default/over-http", "s")
        producer = client.create_producer("persistent://public/default/over-http")
        for i in range(10):
            producer.send(f"m{i}".encode())
        received = [consumer.receive(timeout_millis=10_000).data() for _ in range(10)]
        assert received == [f"m{i}".encode() for i in range(10)]
    finally:
        client.close()
    status, data = _call(standalone, "GET", "/lookup/v2/topic/persistent/public/default/over-http")
    assert status == 200
    lookup = json.loads(data)
    assert lookup["brokerUrl"] == standalone.service_url
    assert lookup["httpUrl"] == standalone.web_service_url
    assert {"brokerUrlTls", "httpUrlTls"} <= set(lookup)


def test_a_namespace_that_holds_topics_is_not_deleted(standalone: Standalone) -> None:
    assert _call(standalone, "PUT", "/admin/v2/namespaces/public/kept")[0] == 204
    client = standalone.client()
    client.create_producer("persistent://public/kept/t").send(b"kept")
    client.close()
    status, data = _call(standalone, "DELETE", "/admin/v2/namespaces/public/kept")
    assert status == 409
    assert "persistent://public/kept/t" in json.loads(data)["reason"]
    assert _call(standalone, "GET", "/admin/v2/namespaces/public/kept")[0] == 200
    assert _call(standalone, "PUT", "/admin/v2/namespaces/public/empty")[0] == 204
    assert _call(standalone, "DELETE", "/admin/v2/namespaces/public/empty")[0] == 204
    assert _call(standalone, "GET", "/admin/v2/namespaces/public/empty")[0] == 404
