"""The link proxy between regions: bytes flow while the link is up, nothing crosses a cut (on
open connections or new ones), and everything held during the cut arrives in order once healed."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from magnetar.local.link_proxy import LinkProxy


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while data := await reader.read(1024):
        writer.write(data)
        await writer.drain()
    writer.close()


@pytest.fixture
async def proxy() -> AsyncIterator[tuple[LinkProxy, int]]:
    echo = await asyncio.start_server(_echo, "127.0.0.1", 0)
    link = LinkProxy([("127.0.0.1", echo.sockets[0].getsockname()[1])])
    server = await asyncio.start_server(link.handle, "127.0.0.1", 0)
    yield link, server.sockets[0].getsockname()[1]
    await link.close()
    server.close()
    echo.close()


async def test_bytes_cross_an_open_link(proxy: tuple[LinkProxy, int]) -> None:
    _, port = proxy
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"hello")
    assert await asyncio.wait_for(reader.readexactly(5), 5) == b"hello"
    writer.close()


async def test_a_cut_holds_everything_until_the_link_heals(proxy: tuple[LinkProxy, int]) -> None:
    link, port = proxy
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"a")
    assert await asyncio.wait_for(reader.readexactly(1), 5) == b"a"
    link.cut()
    writer.write(b"bcd")
    late_reader, late_writer = await asyncio.open_connection("127.0.0.1", port)  # accepted, but silent
    late_writer.write(b"x")
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(reader.readexactly(1), 0.5)
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(late_reader.readexactly(1), 0.5)
    link.heal()
    assert await asyncio.wait_for(reader.readexactly(3), 5) == b"bcd"
    assert await asyncio.wait_for(late_reader.readexactly(1), 5) == b"x"
    for w in (writer, late_writer):
        w.close()


async def test_connections_go_to_a_target_that_is_up(proxy: tuple[LinkProxy, int]) -> None:
    link, port = proxy
    link.targets.insert(0, ("127.0.0.1", 1))  # a broker that is down (nothing listens there)
    for _ in range(3):  # whichever target's turn it is
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"ok")
        assert await asyncio.wait_for(reader.readexactly(2), 5) == b"ok"
        writer.close()


async def test_every_target_down_closes_the_connection(proxy: tuple[LinkProxy, int]) -> None:
    link, port = proxy
    link.targets[:] = [("127.0.0.1", 1)]  # nothing listens there
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    assert await asyncio.wait_for(reader.read(1), 5) == b""
    writer.close()
