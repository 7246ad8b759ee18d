"""What one idle topic costs the broker, by allocation site: a standalone broker (SQLite metadata,
one bookie) runs in this process under tracemalloc; client processes (bench/scale_client.py, the
official client) open a producer and an Exclusive consumer on each topic; after a round trip
through every topic, at rest, the broker's heap, asyncio tasks and timers are compared with
before the topics.

    .venv/bin/python bench/probe_topic_cost.py                  # 1,000 topics
    .venv/bin/python bench/probe_topic_cost.py --topics 2000 --top 40
    .venv/bin/python bench/probe_topic_cost.py --unload      # and what an unload leaves to the collector

Prints tasks, timers and traced bytes per topic and the allocation sites (file:line) that grew
most, per topic; then the objects the garbage collector tracks per topic, by type (what each of
its collections walks once they are young, and what a bulk load of topics promotes). With
``--unload``, the namespace is then unloaded and every topic loaded again (each client's round
trip), with the collector off, and the objects only a collection frees (held
in reference cycles) are counted per topic, by type. tracemalloc counts Python's allocations only
(not the C client libraries', nor the allocator's slack RSS shows): bench_scale.py measures RSS.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import sys
import tempfile
import tracemalloc
from pathlib import Path
from typing import Any

CLIENT = Path(__file__).parent / "scale_client.py"


async def client_process(service_url: str, topics: str) -> asyncio.subprocess.Process:
    """A scale client opening ``topics`` (namespace:first:count); returns once they are open."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(CLIENT), service_url, topics,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    await answer(process, "ready")
    return process


async def answer(process: asyncio.subprocess.Process, event: str) -> dict[str, Any]:
    assert process.stdout is not None
    while True:
        line = (await process.stdout.readline()).decode()
        if not line:
            raise RuntimeError(f"the client exited before {event}")
        if line.startswith("@scale "):
            found: dict[str, Any] = json.loads(line[len("@scale ") :])
            if found.get("event") == event:
                if found.get("failed"):
                    raise RuntimeError(f"client: {found}")
                return found


async def roundtrip(process: asyncio.subprocess.Process) -> None:
    assert process.stdin is not None
    process.stdin.write(b"roundtrip\n")
    await process.stdin.drain()
    await answer(process, "roundtrip")


async def quit_client(process: asyncio.subprocess.Process) -> None:
    assert process.stdin is not None
    process.stdin.write(b"quit\n")
    await process.stdin.drain()
    await process.wait()


def loop_counts() -> tuple[int, int]:
    return len(asyncio.all_tasks()), len(getattr(asyncio.get_running_loop(), "_scheduled", ()))


def tracked_by_type() -> dict[str, int]:
    """The objects the garbage collector tracks (what its collections walk), by type."""
    counts: dict[str, int] = {}
    for obj in gc.get_objects():
        name = type(obj).__qualname__
        counts[name] = counts.get(name, 0) + 1
    return counts


async def unload_garbage(
    broker: Any, clients: list[asyncio.subprocess.Process], topics: int, top: int
) -> None:
    """Unload the namespace and load every topic again, with the collector off, then count what
    a collection finds unreachable: what the unloaded topics left in reference cycles."""
    import aiohttp

    gc.collect()
    gc.disable()
    try:
        async with aiohttp.ClientSession() as http:
            url = f"{broker.web_service_url}/admin/v2/namespaces/public/default/unload"
            async with http.put(url) as response:
                response.raise_for_status()
        for process in clients:
            await roundtrip(process)
        gc.set_debug(gc.DEBUG_SAVEALL)
        found = gc.collect()
        by_type: dict[str, int] = {}
        for obj in gc.garbage:
            name = type(obj).__qualname__
            by_type[name] = by_type.get(name, 0) + 1
        gc.garbage.clear()
    finally:
        gc.set_debug(0)
        gc.enable()
    print(f"after an unload and reload: {found / topics:.1f} unreachable objects/topic")
    for name, count in sorted(by_type.items(), key=lambda kv: -kv[1])[:top]:
        print(f"{count / topics:12.2f}  {name}")


async def probe(topics: int, top: int, data_dir: Path, unload: bool) -> None:
    from magnetar.bookie.config import BookieConfig
    from magnetar.bookie.server import start_bookie
    from magnetar.broker.config import BrokerConfig
    from magnetar.broker.service import BrokerService

    config = BrokerConfig.load(
        None,
        {
            "metadata_store_url": f"sqlite://{data_dir / 'metadata.db'}",
            "managed_ledger_default_ensemble_size": 1,
            "managed_ledger_default_write_quorum": 1,
            "managed_ledger_default_ack_quorum": 1,
            "broker_service_port": 0,
            "web_service_port": 0,
        },
    )
    bookie = await start_bookie(
        BookieConfig(
            bookie_port=0,
            journal_directory=str(data_dir / "journal"),
            ledger_directories=[str(data_dir / "ledgers")],
            metadata_service_uri=config.metadata_store_url,
            enable_statistics=False,
            auto_recovery_daemon_enabled=False,
        )
    )
    broker = BrokerService(config)
    await broker.start()
    clients = []
    try:
        # A few topics first: what any topic at all brings (the bundle, connections, caches).
        clients.append(await client_process(broker.service_url, "public/default:0:20"))
        await roundtrip(clients[0])
        gc.collect()
        tasks_before, timers_before = loop_counts()
        tracked_before = tracked_by_type()
        before = tracemalloc.take_snapshot()
        print(f"opening {topics:,} topics …", file=sys.stderr)
        clients.append(await client_process(broker.service_url, f"public/default:1000:{topics}"))
        await roundtrip(clients[1])
        # What the round trip started ends by itself (cursor flushes create each cursor's ledger
        # on its first acknowledgement): wait until the task count stops falling, at most 60 s.
        previous, steady = len(asyncio.all_tasks()), 0
        for _ in range(120):
            await asyncio.sleep(0.5)
            now = len(asyncio.all_tasks())
            steady = steady + 1 if now >= previous else 0
            previous = now
            if steady >= 4:
                break
        gc.collect()
        tasks_after, timers_after = loop_counts()
        tracked_after = tracked_by_type()
        after = tracemalloc.take_snapshot()
        by_coroutine: dict[str, int] = {}
        for task in asyncio.all_tasks():
            name = getattr(task.get_coro(), "__qualname__", "?")
            by_coroutine[name] = by_coroutine.get(name, 0) + 1
        busiest = sorted(by_coroutine.items(), key=lambda kv: -kv[1])[:5]
        stats = after.compare_to(before, "lineno")
        grown = sum(s.size_diff for s in stats)
        print(f"topics {topics:,}: tasks/topic {(tasks_after - tasks_before) / topics:.2f}, "
              f"timers/topic {(timers_after - timers_before) / topics:.2f}, "
              f"traced bytes/topic {grown / topics:,.0f}")  # fmt: skip
        print("tasks by coroutine: " + ", ".join(f"{name} {count}" for name, count in busiest))
        print(f"{'bytes/topic':>12} {'objs/topic':>10}  site")
        for stat in stats[:top]:
            frame = stat.traceback[0]
            site = f"{frame.filename.split('site-packages/')[-1].split('/main/')[-1]}:{frame.lineno}"
            print(f"{stat.size_diff / topics:12,.0f} {stat.count_diff / topics:10.1f}  {site}")
        grown_by_type = {k: n - tracked_before.get(k, 0) for k, n in tracked_after.items()}
        print(f"objects the collector tracks: {sum(grown_by_type.values()) / topics:.1f}/topic, by type:")
        for name, count in sorted(grown_by_type.items(), key=lambda kv: -kv[1])[:top]:
            print(f"{count / topics:12.2f}  {name}")
        if unload:
            await unload_garbage(broker, clients, topics, top)
    finally:
        for process in clients:
            await quit_client(process)
        await broker.stop()
        await bookie.stop()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--topics", type=int, default=1000, help="topics to open (default 1000)")
    parser.add_argument("--top", type=int, default=30, help="allocation sites to print (default 30)")
    parser.add_argument(
        "--unload", action="store_true", help="then unload and reload, and count the cyclic garbage left"
    )
    args = parser.parse_args()
    if args.topics < 1:
        parser.error(f"--topics must be at least 1, not {args.topics}")
    tracemalloc.start(1)
    with tempfile.TemporaryDirectory(prefix="magnetar-probe-") as tmp:
        asyncio.run(probe(args.topics, args.top, Path(tmp), args.unload))


if __name__ == "__main__":
    main()
