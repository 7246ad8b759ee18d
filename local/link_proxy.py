"""A TCP proxy on the link between two regions, which the chaos lab can cut.

Cross-region traffic of a local cluster (geo-replication: a broker's replicator producing to the
remote cluster) goes through one of these per remote broker: the broker advertises the proxy's
address under the ``replication`` listener, and the cluster's ``listenerName`` makes replicators
look it up. Clients in a region talk to their brokers directly and are never cut.

With several targets the proxy is the region's front door (the cluster's ``brokerServiceUrl`` for
the other regions, as a load balancer or DNS name would be in a real deployment): each connection
goes to the first target that accepts it, starting from the next one in turn, so lookups from
other regions still work while some of the region's brokers are down.

A cut behaves as a network partition does, not as a refused connection: the proxy stops moving
bytes in both directions on every connection, and new connections are accepted but carry nothing,
so the peers see silence (a send that never gets a receipt, a keep-alive that times out). When the
link heals, bytes flow again on the connections that survived, as TCP's retransmissions would
deliver them after a short real partition. Nothing is dropped or reordered by the proxy itself.

Signals: SIGUSR1 cuts the link, SIGUSR2 heals it, SIGTERM stops the proxy.

Started by ``magnetar local up`` as ``magnetar local link-proxy`` (see its ``--help``).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import signal

#: bytes moved per read; small enough that a cut stops a stream promptly
CHUNK = 64 * 1024


class LinkProxy:
    """Forwards connections to one of ``targets`` while the link is up."""

    def __init__(self, targets: list[tuple[str, int]]) -> None:
        if not targets:
            raise ValueError("a link proxy needs at least one target")
        self.targets = list(targets)
        self._turn = itertools.count()
        self._up = asyncio.Event()
        self._up.set()
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def is_cut(self) -> bool:
        return not self._up.is_set()

    def cut(self) -> None:
        self._up.clear()
        print("link cut", flush=True)

    def heal(self) -> None:
        self._up.set()
        print("link healed", flush=True)

    async def handle(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        await self._up.wait()  # a connection made during a cut hangs, as a SYN to a cut network would
        opened = await self._connect()
        if opened is None:
            client_writer.close()  # every broker behind the link is down: the peer sees a refusal
            return
        server_reader, server_writer = opened
        pumps = [
            asyncio.ensure_future(self._pump(client_reader, server_writer)),
            asyncio.ensure_future(self._pump(server_reader, client_writer)),
        ]
        for task in pumps:
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        # when one side closes, close the other so neither peer waits on a half-open link
        await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        for task in pumps:
            task.cancel()
        for writer in (client_writer, server_writer):
            writer.close()

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        first = next(self._turn) % len(self.targets)
        for target in self.targets[first:] + self.targets[:first]:
            with contextlib.suppress(OSError):
                return await asyncio.open_connection(*target)
        return None

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            while True:
                await self._up.wait()
                data = await reader.read(CHUNK)
                if not data:
                    return
                await self._up.wait()  # read during a cut: held, not delivered, until the link heals
                writer.write(data)
                await writer.drain()

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()


def parse_address(text: str) -> tuple[str, int]:
    """``host:port`` -> (host, port); ValueError naming the text otherwise."""
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"expected host:port, got {text!r}")
    return host, int(port)


async def serve(listen: tuple[str, int], targets: list[tuple[str, int]]) -> None:
    proxy = LinkProxy(targets)
    server = await asyncio.start_server(proxy.handle, *listen)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGUSR1, proxy.cut)
    loop.add_signal_handler(signal.SIGUSR2, proxy.heal)
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    host, port = server.sockets[0].getsockname()[:2]
    shown = ",".join(f"{h}:{p}" for h, p in targets)
    print(f"link proxy ready address={host}:{port} targets={shown}", flush=True)
    async with server:
        await stop.wait()
    await proxy.close()


def run(listen: tuple[str, int], targets: list[tuple[str, int]]) -> None:
    """Serve until SIGTERM or SIGINT (uvloop where available)."""
    from magnetar.common.process import run as run_loop

    run_loop(serve(listen, targets))
