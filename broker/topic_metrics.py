"""Every loaded topic's Prometheus metrics, written as text directly (Pulsar's names and labels:
``cluster``, ``namespace``, ``topic``).

prometheus_client's collectors make a sample object for each value and escape and check the
labels of each: a broker of 6,000 topics (13 values each) spent about a second of its event loop
on one scrape. Here a topic's labels are escaped once, when it is first scraped, and its lines
written from them, in the format and order the collectors wrote: each family's HELP and TYPE,
then its line for every topic; counters named with ``_total``. Rates are computed over the
interval since the previous scrape, as Pulsar computes them over its stats interval.

A scrape is written in chunks with the event loop free between them, and scrapes that arrive
while one is written share its text (as Pulsar's metrics generator shares one generation among
concurrent scrapes). A broker of very many topics can write one line per namespace instead
(``expose_topic_level_metrics_in_prometheus``, Pulsar's setting of that name).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from prometheus_client.utils import floatToGoString

from magnetar.broker.loadbalance.load_report import LoadedTopics

if TYPE_CHECKING:
    from magnetar.broker.topic import Topic

#: (name, type, help), in the order they are written
FAMILIES = (
    ("pulsar_rate_in", "gauge", "Messages/s published"),
    ("pulsar_rate_out", "gauge", "Messages/s dispatched"),
    ("pulsar_throughput_in", "gauge", "Bytes/s published"),
    ("pulsar_throughput_out", "gauge", "Bytes/s dispatched"),
    ("pulsar_msg_backlog", "gauge", "Entries not yet acknowledged, over all durable subscriptions"),
    ("pulsar_storage_size", "gauge", "Bytes stored"),
    ("pulsar_producers_count", "gauge", "Producers"),
    ("pulsar_subscriptions_count", "gauge", "Subscriptions"),
    ("pulsar_consumers_count", "gauge", "Consumers"),
    ("pulsar_in_messages", "counter", "Messages published since the topic was loaded"),
    ("pulsar_in_bytes", "counter", "Bytes published since the topic was loaded"),
    ("pulsar_out_messages", "counter", "Messages dispatched since the topic was loaded"),
    ("pulsar_out_bytes", "counter", "Bytes dispatched since the topic was loaded"),
)

#: topics per namespace, written when the lines are per namespace (as Pulsar writes it then)
TOPICS_COUNT = "pulsar_topics_count"

#: a value as the text format writes it (Go's formatting of floats, as prometheus_client does)
_number: Callable[[float], str] = floatToGoString


#: topics read, or lines written, between two yields to the event loop during a scrape
CHUNK = 250

Row = tuple[str, tuple[float, ...]]


class TopicMetrics:
    """The topics' lines of ``/metrics``: one line per topic in each family, or with
    ``per_topic`` off (Pulsar's ``exposeTopicLevelMetricsInPrometheus=false``) one per namespace,
    its topics' values summed, and a ``pulsar_topics_count``."""

    def __init__(self, topics: LoadedTopics, cluster: str, *, per_topic: bool = True) -> None:
        self._topics = topics
        self._cluster = _escape(cluster)
        self._per_topic = per_topic
        #: per topic: time of the previous scrape, the counters then, its labels as written
        self._last: dict[str, tuple[float, tuple[int, int, int, int], str]] = {}
        #: the scrape being written: scrapes that come meanwhile are answered with its text
        self._writing: asyncio.Future[list[bytes]] | None = None

    async def text(self) -> str:
        """Every family's lines, topic by topic (or namespace by namespace) in each."""
        return b"".join(await self.chunks()).decode()

    async def chunks(self) -> list[bytes]:
        """The text, encoded, in pieces of at most ``CHUNK`` lines (to be written one after another).

        Written a chunk of topics at a time with the event loop free in between: a broker of
        100,000 topics writes some 150 MB, seconds of CPU that must not hold up its clients."""
        if self._writing is not None:
            return await asyncio.shield(self._writing)
        writing = self._writing = asyncio.get_running_loop().create_future()
        try:
            written = await self._write()
        except BaseException as exc:
            writing.set_exception(exc)
            writing.exception()  # read here: a scrape that nobody shared must not warn
            raise
        else:
            writing.set_result(written)
            return written
        finally:
            self._writing = None

    async def _write(self) -> list[bytes]:
        rows = await self._rows()
        counts: list[tuple[str, int]] = []
        if not self._per_topic:
            rows, counts = await _by_namespace(rows)
        out: list[bytes] = []
        for index, (name, kind, documentation) in enumerate(FAMILIES):
            sample = f"{name}_total" if kind == "counter" else name
            out.append(f"# HELP {sample} {documentation}\n# TYPE {sample} {kind}\n".encode())
            for start in range(0, len(rows), CHUNK):
                lines = (
                    f"{sample}{labels} {_number(values[index])}\n"
                    for labels, values in rows[start : start + CHUNK]
                )
                out.append("".join(lines).encode())
                await asyncio.sleep(0)
        if counts:
            lines = (f"{TOPICS_COUNT}{labels} {_number(count)}\n" for labels, count in counts)
            out.append(f"# HELP {TOPICS_COUNT} Topics loaded\n# TYPE {TOPICS_COUNT} gauge\n".encode())
            out.append("".join(lines).encode())
        return out

    async def _rows(self) -> list[Row]:
        """(the topic's labels as written, its values in ``FAMILIES``' order), per topic."""
        now = time.monotonic()
        topics = list(self._topics.items())
        rows: list[Row] = []
        for start in range(0, len(topics), CHUNK):
            if start:
                await asyncio.sleep(0)
            rows.extend(self._row(key, topic, now) for key, topic in topics[start : start + CHUNK])
        last = self._last
        if len(last) > len(topics):
            live = {key for key, _ in topics}
            for gone in [key for key in last if key not in live]:
                del last[gone]
        return rows

    def _row(self, key: str, topic: Topic, now: float) -> Row:
        """The topic's labels as written, and its values in ``FAMILIES``' order."""
        messages_out = bytes_out = backlog = 0
        for subscription in topic.subscriptions.values():
            dispatcher = subscription.dispatcher
            messages_out += dispatcher.messages_out
            bytes_out += dispatcher.bytes_out
            if subscription.durable:
                backlog += subscription.backlog
        # PIP-33 markers are no user messages
        totals = (topic.messages_in - topic.markers_in, topic.bytes_in, messages_out, bytes_out)
        kept = self._last.get(key)
        if kept is None:
            labels = self._labels(topic.name.namespace_name, key)
            rates: tuple[float, ...] = (0.0, 0.0, 0.0, 0.0)
        else:
            then, before, labels = kept
            elapsed = now - then
            # An unsubscribed subscription takes its counts along: never report a negative rate.
            rates = tuple(
                max(0, t - b) / elapsed if elapsed > 0 else 0.0 for t, b in zip(totals, before, strict=True)
            )
        self._last[key] = (now, totals, labels)
        values = (
            rates[0],
            rates[2],
            rates[1],
            rates[3],
            backlog,
            topic.ledger.total_size,
            len(topic.producers),
            len(topic.subscriptions),
            len(topic.consumers()),
            *totals,
        )
        return labels, values

    def _labels(self, namespace: str, topic: str) -> str:
        if not self._per_topic:
            return f'{{cluster="{self._cluster}",namespace="{_escape(namespace)}"}}'
        return f'{{cluster="{self._cluster}",namespace="{_escape(namespace)}",topic="{_escape(topic)}"}}'


async def _by_namespace(rows: list[Row]) -> tuple[list[Row], list[tuple[str, int]]]:
    """The rows of one namespace's topics (which share their labels) summed, in the order
    their namespaces first come, and how many topics each has (``pulsar_topics_count``)."""
    sums: dict[str, list[float]] = {}
    counts: dict[str, int] = {}
    for done, (labels, values) in enumerate(rows, 1):
        if done % CHUNK == 0:
            await asyncio.sleep(0)
        total = sums.get(labels)
        if total is None:
            sums[labels] = list(values)
            counts[labels] = 1
        else:
            for index, value in enumerate(values):
                total[index] += value
            counts[labels] += 1
    return [(labels, tuple(values)) for labels, values in sums.items()], list(counts.items())


def _escape(value: str) -> str:
    """A label value as the text format writes it."""
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")
