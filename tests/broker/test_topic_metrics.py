"""Every topic's metrics as the broker writes them: what prometheus_client's collectors would write
for the same values (names, HELP, TYPE, labels escaped, numbers), and rates between scrapes."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families

from magnetar.broker.topic import Topic, TopicName
from magnetar.broker.topic_metrics import CHUNK, FAMILIES, TopicMetrics


class Loaded:
    def __init__(self, topics: dict[str, Any]) -> None:
        self.topics = topics

    def items(self) -> list[tuple[str, Topic]]:
        return list(self.topics.items())

    def __len__(self) -> int:
        return len(self.topics)


def a_topic(name: str, n: int) -> Any:
    subscriptions = {
        "durable": SimpleNamespace(
            dispatcher=SimpleNamespace(messages_out=n, bytes_out=n * 10), backlog=n, durable=True
        ),
        "reader": SimpleNamespace(
            dispatcher=SimpleNamespace(messages_out=1, bytes_out=7), backlog=99, durable=False
        ),
    }
    return SimpleNamespace(
        name=TopicName.parse(name), subscriptions=subscriptions, messages_in=n * 3, markers_in=1,
        bytes_in=n * 3000, ledger=SimpleNamespace(total_size=10**17 + n), producers={1: 0, 2: 0},
        consumers=lambda: [1, 2, 3],
    )  # fmt: skip


def expected(topics: dict[str, Any], cluster: str) -> str:
    """What prometheus_client writes for these topics' values at a first scrape (rates 0)."""

    class Collector:
        def collect(self) -> list[Metric]:
            families: list[Metric] = []
            for name, kind, documentation in FAMILIES:
                family = (GaugeMetricFamily if kind == "gauge" else CounterMetricFamily)(
                    name, documentation, labels=["cluster", "namespace", "topic"]
                )
                for key, t in topics.items():
                    durable = [s for s in t.subscriptions.values() if s.durable]
                    value = {
                        "pulsar_msg_backlog": sum(s.backlog for s in durable),
                        "pulsar_storage_size": t.ledger.total_size,
                        "pulsar_producers_count": len(t.producers),
                        "pulsar_subscriptions_count": len(t.subscriptions),
                        "pulsar_consumers_count": len(t.consumers()),
                        "pulsar_in_messages": t.messages_in - t.markers_in,
                        "pulsar_in_bytes": t.bytes_in,
                        "pulsar_out_messages": sum(
                            s.dispatcher.messages_out for s in t.subscriptions.values()
                        ),
                        "pulsar_out_bytes": sum(s.dispatcher.bytes_out for s in t.subscriptions.values()),
                    }.get(name, 0.0)
                    family.add_metric([cluster, t.name.namespace_name, key], float(value))
                families.append(family)
            return families

    registry = CollectorRegistry()
    registry.register(Collector())
    return generate_latest(registry).decode()


async def test_the_text_is_what_prometheus_client_writes() -> None:
    topics = {
        f"persistent://public/ns-{i % 3}/t{i}": a_topic(f"persistent://public/ns-{i % 3}/t{i}", i)
        for i in range(40)
    }
    odd = 'persistent://public/ns-0/quote"back\\slash'
    topics[odd] = a_topic(odd, 5)
    cluster = 'region "a"'
    text = await TopicMetrics(Loaded(topics), cluster).text()
    assert text == expected(topics, cluster)
    parsed = {f.name: f for f in text_string_to_metric_families(text)}
    assert {s.labels["topic"] for s in parsed["pulsar_msg_backlog"].samples} == set(topics)


async def test_rates_are_over_the_time_since_the_previous_scrape() -> None:
    topic = a_topic("persistent://public/default/t", 10)
    loaded = Loaded({"persistent://public/default/t": topic})
    metrics = TopicMetrics(loaded, "here")
    await metrics.text()
    topic.messages_in += 500
    topic.subscriptions["durable"].dispatcher.messages_out += 100

    def sample(text: str, family: str) -> float:
        (found,) = [f for f in text_string_to_metric_families(text) if f.name == family]
        return float(found.samples[0].value)

    text = await metrics.text()
    assert sample(text, "pulsar_rate_in") > 0
    assert sample(text, "pulsar_rate_in") == pytest.approx(5 * sample(text, "pulsar_rate_out"))
    loaded.topics.clear()  # unloaded: nothing written, nothing kept
    assert "persistent://public/default/t" not in await metrics.text()


async def test_per_namespace_the_topics_values_are_summed() -> None:
    names = [f"persistent://public/ns-{i % 3}/t{i}" for i in range(30)]
    topics = {name: a_topic(name, i) for i, name in enumerate(names)}
    text = await TopicMetrics(Loaded(topics), "here", per_topic=False).text()
    parsed = {f.name: f for f in text_string_to_metric_families(text)}
    for family in parsed.values():
        assert all("topic" not in s.labels for s in family.samples), family.name
    backlog = {s.labels["namespace"]: s.value for s in parsed["pulsar_msg_backlog"].samples}
    assert backlog == {f"public/ns-{k}": float(sum(i for i in range(30) if i % 3 == k)) for k in range(3)}
    stored = {s.labels["namespace"]: s.value for s in parsed["pulsar_in_messages"].samples}
    assert stored["public/ns-1"] == sum(i * 3 - 1 for i in range(30) if i % 3 == 1)
    assert [s.value for s in parsed["pulsar_topics_count"].samples] == [10.0, 10.0, 10.0]


async def test_a_scrape_of_many_topics_leaves_the_event_loop_free_and_is_shared() -> None:
    """Other work runs while a scrape of many topics is written, and a scrape that comes
    meanwhile gets the same text instead of writing it again."""
    names = [f"persistent://public/default/t{i}" for i in range(5 * CHUNK)]
    loaded = Loaded({name: a_topic(name, i) for i, name in enumerate(names)})
    reads = 0
    items = loaded.items

    def counted() -> list[tuple[str, Topic]]:
        nonlocal reads
        reads += 1
        return items()

    loaded.items = counted  # type: ignore[method-assign]
    metrics = TopicMetrics(loaded, "here")
    ticks = 0
    scraping = True

    async def ticker() -> None:
        nonlocal ticks
        while scraping:
            ticks += 1
            await asyncio.sleep(0)

    other = asyncio.create_task(ticker())
    try:
        first, second = await asyncio.gather(metrics.text(), metrics.text())
    finally:
        scraping = False
        await other
    assert ticks >= 5, f"the event loop ran other work {ticks} times while the scrape was written"
    assert reads == 1, "a scrape that came meanwhile wrote the text again"
    assert first == second
    assert first.count("pulsar_msg_backlog{") == len(names)
