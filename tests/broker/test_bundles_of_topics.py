"""Which bundle a topic falls in, and namespace policies read by many topics at once."""

from __future__ import annotations

import random

from magnetar.broker.namespace import Bundle, NamespacePolicies, Namespaces, even_boundaries, topic_hash
from magnetar.common.metadata import open_store


def test_a_topic_falls_in_the_one_bundle_whose_range_holds_its_hash() -> None:
    rng = random.Random(4)
    for count in (1, 4, 16, 7):
        policies = NamespacePolicies(boundaries=even_boundaries(count))
        for _ in range(2000):
            topic = f"persistent://public/default/t-{rng.random()}"
            (holder,) = [b for b in policies.bundles() if b.contains(topic_hash(topic))]
            assert policies.bundle_for(topic) == holder
    split = NamespacePolicies(boundaries=[0, 0x40000000, 0x60000000, 0x1_0000_0000])
    assert split.bundle_for("persistent://a/b/edge") in split.bundles()
    assert Bundle.parse("0x40000000_0x60000000") in split.bundles()


async def test_policies_read_again_after_a_change_show_it(memory_url: str) -> None:
    store = await open_store(memory_url)
    namespaces = Namespaces(store)
    await namespaces.create_tenant("t", ["here"])
    await namespaces.create("t/ns")
    first = await namespaces.policies("t/ns")
    assert await namespaces.policies("t/ns") is first  # parsed once while unchanged
    await namespaces.update("t/ns", {"deduplication_enabled": True})
    changed = await namespaces.policies("t/ns")
    assert changed.deduplication_enabled is True
    assert first.deduplication_enabled is None
    await namespaces.split("t/ns", changed.bundles()[0])
    assert len((await namespaces.policies("t/ns")).bundles()) == len(changed.bundles()) + 1
    await store.close()
