"""The admin REST API's error middleware: a metadata store that cannot be reached gives a
retriable JSON 503 naming it, not a plain-text 500 (the middleware alone, on a real aiohttp
server)."""

from __future__ import annotations

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from magnetar.broker.admin.app import errors
from magnetar.common.metadata import MetadataError, NoNodeError, SessionExpiredError


async def _call(exc: Exception) -> tuple[int, str, str]:
    async def handler(_request: web.Request) -> web.Response:
        raise exc

    app = web.Application(middlewares=[errors])
    app.router.add_get("/admin/v2/thing", handler)
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        response = await client.get("/admin/v2/thing")
        return response.status, response.content_type, await response.text()


async def test_an_unreachable_store_is_a_retriable_json_error() -> None:
    for exc in (MetadataError("/brokers", "connection lost"), SessionExpiredError("/brokers")):
        status, content_type, body = await _call(exc)
        assert status == 503
        assert content_type == "application/json"
        assert "metadata store unavailable" in body


async def test_a_missing_node_escaping_a_handler_is_not_passed_off_as_an_outage() -> None:
    status, _, body = await _call(NoNodeError("/admin/policies/x"))
    assert status == 500
    assert "metadata store unavailable" not in body
