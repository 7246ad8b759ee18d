"""Every loaded topic's Prometheus metrics, written as text directly (Pulsar's names and labels:
``cluster``, ``namespace``, ``topic``).

prometheus_client's collectors make a sample object for each value and escape and check the
labels of each: a broker of 6,000 topics (13 values each) spent about a second of its event loop
on one scrape. Here a topic's labels are escaped once and its lines written from them, in the
format and order the collectors wrote: each family's HELP and TYPE, then its line for every
topic; counters named with ``_total``. Rates are computed over the interval since the previous
scrape, as Pulsar computes them over its stats interval.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from prometheus_client.utils import floatToGoString

from magnetar.broker.loadbalance.load_report import LoadedTopics

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

#: a value as the text format writes it (Go's formatting of floats, as prometheus_client does)
_number: Callable[[float], str] = floatToGoString


class TopicMetrics:
    def __init__(self, topics: LoadedTopics, cluster: str) -> None:
        self._topics = topics
        self._cluster = _escape(cluster)
        #: per topic: time of the previous scrape and the counters then
        self._last: dict[str, tuple[float, tuple[int, int, int, int]]] = {}

    def text(self) -> str:
        """Every family's lines, topic by topic in each."""
        rows = self._rows()
        out: list[str] = []
        for index, (name, kind, documentation) in enumerate(FAMILIES):
            sample = f"{name}_total" if kind == "counter" else name
            out.append(f"# HELP {sample} {documentation}\n# TYPE {sample} {kind}\n")
            out.extend(f"{sample}{labels} {_number(values[index])}\n" for labels, values in rows)
        return "".join(out)

    def _rows(self) -> list[tuple[str, tuple[float, ...]]]:
        """(the topic's labels as written, its values in ``FAMILIES``' order), per topic."""
        now = time.monotonic()
        live = set()
        rows = []
        for key, topic in self._topics.items():
            live.add(key)
            dispatchers = [s.dispatcher for s in topic.subscriptions.values()]
            totals = (
                topic.messages_in - topic.markers_in,  # PIP-33 markers are no user messages
                topic.bytes_in,
                sum(d.messages_out for d in dispatchers),
                sum(d.bytes_out for d in dispatchers),
            )
            then, before = self._last.get(key, (now, totals))
            self._last[key] = (now, totals)
            elapsed = now - then
            # An unsubscribed subscription takes its counts along: never report a negative rate.
            rates = [
                max(0, t - b) / elapsed if elapsed > 0 else 0.0 for t, b in zip(totals, before, strict=True)
            ]
            values = (
                rates[0],
                rates[2],
                rates[1],
                rates[3],
                sum(s.backlog for s in topic.subscriptions.values() if s.durable),
                topic.ledger.total_size,
                len(topic.producers),
                len(topic.subscriptions),
                len(topic.consumers()),
                *totals,
            )
            namespace = _escape(topic.name.namespace_name)
            labels = f'{{cluster="{self._cluster}",namespace="{namespace}",topic="{_escape(key)}"}}'
            rows.append((labels, tuple(float(v) for v in values)))
        for gone in set(self._last) - live:
            del self._last[gone]
        return rows


def _escape(value: str) -> str:
    """A label value as the text format writes it."""
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")
