"""The one admin client against a real HTTP server on loopback: redirects followed for every
method, Pulsar's JSON reasons in its errors, an unreachable API said plainly, and the blocking
wrapper usable with or without a running event loop."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from magnetar.admin.client import AdminClient, AdminError, AsyncAdminClient
from magnetar.common.ports import free_port


@pytest.fixture
async def server() -> AsyncIterator[str]:
    async def target(request: web.Request) -> web.Response:
        return web.json_response({"method": request.method, "body": await request.json()})

    async def moved(request: web.Request) -> web.Response:
        raise web.HTTPTemporaryRedirect("/target")

    async def exists(request: web.Request) -> web.Response:
        return web.json_response({"reason": "tenant acme already exists"}, status=409)

    app = web.Application()
    app.router.add_route("*", "/target", target)
    app.router.add_route("*", "/moved", moved)
    app.router.add_route("*", "/exists", exists)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    yield f"http://127.0.0.1:{port}"
    await runner.cleanup()


async def test_redirects_are_followed_for_put_and_post(server: str) -> None:
    client = AsyncAdminClient(server)
    assert await client.request("PUT", "/moved", {"a": 1}) == {"method": "PUT", "body": {"a": 1}}
    assert await client.request("POST", "/moved", [1, 2]) == {"method": "POST", "body": [1, 2]}


async def test_errors_carry_the_status_and_pulsars_reason(server: str) -> None:
    with pytest.raises(AdminError, match="PUT /exists: HTTP 409: tenant acme already exists") as caught:
        await AsyncAdminClient(server).request("PUT", "/exists", {})
    assert caught.value.status == 409
    assert not caught.value.retriable


async def test_an_unreachable_api_is_said_plainly() -> None:
    port = free_port()  # nothing listens there
    with pytest.raises(AdminError, match=f"cannot reach the admin API at http://127.0.0.1:{port}") as caught:
        await AsyncAdminClient(f"http://127.0.0.1:{port}", timeout_s=5).request("GET", "/admin/v2/tenants")
    assert caught.value.status is None
    assert caught.value.retriable


async def test_the_blocking_wrapper_works_inside_and_outside_an_event_loop(server: str) -> None:
    async def from_a_coroutine() -> object:
        return AdminClient(server).call("PUT", "/moved", {"b": 2})

    # Inside a running loop (another thread's here, as the server runs on this one): the call
    # runs on a thread of its own, where asyncio.run would refuse.
    result = await asyncio.to_thread(asyncio.run, from_a_coroutine())
    assert result == {"method": "PUT", "body": {"b": 2}}
    # From a thread without a loop (as a Chaos Toolkit activity or the CLI).
    result = await asyncio.to_thread(AdminClient(server).call, "POST", "/target", {"c": 3})
    assert result == {"method": "POST", "body": {"c": 3}}
