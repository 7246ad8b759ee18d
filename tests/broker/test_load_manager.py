"""The load manager's decisions over injected load reports: ThresholdShedder, placement, split."""

from __future__ import annotations

from magnetar.broker.config import BrokerConfig
from magnetar.broker.loadbalance.load_manager import (
    Candidate,
    ShedderState,
    bundles_to_split,
    place,
    resource_usage,
    threshold_shedder,
)
from magnetar.broker.loadbalance.load_report import MB, BundleStats, LoadReport

CONFIG = BrokerConfig()


def bundle(index: int) -> str:
    return f"public/default/0x{index * 0x10000000:08x}_0x{(index + 1) * 0x10000000:08x}"


def report(broker: str, cpu: float, bundles: dict[str, float], memory: float = 1.0) -> LoadReport:
    """A report whose bundles each carry the given throughput in MB/s (in + out split evenly)."""
    stats = {
        key: BundleStats(msg_throughput_in=mbps * MB / 2, msg_throughput_out=mbps * MB / 2, topics=1)
        for key, mbps in bundles.items()
    }
    return LoadReport(
        broker,
        cpu=cpu,
        memory=memory,
        msg_throughput_in=sum(s.msg_throughput_in for s in stats.values()),
        msg_throughput_out=sum(s.msg_throughput_out for s in stats.values()),
        bundles=stats,
    )


def test_usage_is_the_highest_weighted_resource() -> None:
    assert resource_usage(LoadReport("b", cpu=40, memory=70), CONFIG) == 0.7
    weighted = BrokerConfig(load_balancer_memory_resource_weight=0.5)
    assert resource_usage(LoadReport("b", cpu=40, memory=70), weighted) == 0.4


def test_balanced_brokers_shed_nothing() -> None:
    reports = {
        "a": report("a", 50, {bundle(0): 30, bundle(1): 30}),
        "b": report("b", 45, {bundle(2): 30, bundle(3): 30}),
        "c": report("c", 55, {bundle(4): 30, bundle(5): 30}),
    }
    assert threshold_shedder(reports, ShedderState(), 0.0, CONFIG) == []


def test_overloaded_broker_sheds_its_busiest_bundles_until_the_excess_is_covered() -> None:
    reports = {
        "a": report("a", 90, {bundle(0): 100, bundle(1): 20, bundle(2): 60, bundle(3): 20}),
        "b": report("b", 20, {bundle(4): 10}),
        "c": report("c", 10, {bundle(5): 10}),
    }
    decisions = threshold_shedder(reports, ShedderState(), 0.0, CONFIG)
    # average 40 %: a is 50 points over, minus the 10-point threshold plus the 5-point margin:
    # 45 % of its 200 MB/s = 90 MB/s, covered by its busiest bundle (100 MB/s) alone.
    assert [(d.bundle, d.source) for d in decisions] == [(bundle(0), "a")]
    assert "usage 90%" in decisions[0].reason


def test_shedding_takes_several_bundles_when_one_is_not_enough() -> None:
    reports = {
        "a": report("a", 90, {bundle(0): 50, bundle(1): 50, bundle(2): 50, bundle(3): 50}),
        "b": report("b", 20, {}),
        "c": report("c", 10, {}),
    }
    decisions = threshold_shedder(reports, ShedderState(), 0.0, CONFIG)
    assert len(decisions) == 2  # 90 MB/s to move, 50 MB/s a bundle


def test_history_smooths_a_spike() -> None:
    state = ShedderState()
    calm = {
        "a": report("a", 10, {bundle(0): 50, bundle(1): 50}),
        "b": report("b", 10, {bundle(2): 50}),
        "c": report("c", 10, {bundle(3): 50}),
    }
    assert threshold_shedder(calm, state, 0.0, CONFIG) == []
    spike = {**calm, "a": report("a", 60, {bundle(0): 50, bundle(1): 50})}
    # smoothed: 0.9 * 10 % + 0.1 * 60 % = 15 %, average 11.7 %: within the threshold
    assert threshold_shedder(spike, state, 1.0, CONFIG) == []
    assert abs(state.history["a"] - 0.15) < 1e-9
    for second in range(2, 30):
        decisions = threshold_shedder(spike, state, float(second), CONFIG)
        if decisions:
            break
    assert [d.bundle for d in decisions] == [bundle(0)]
    assert second > 2, "a lasting overload is shed, a single spike is not"


def test_small_throughput_and_single_bundles_are_not_shed() -> None:
    small = {
        "a": report("a", 90, {bundle(0): 2, bundle(1): 2}),
        "b": report("b", 10, {}),
    }
    assert threshold_shedder(small, ShedderState(), 0.0, CONFIG) == []
    single = {
        "a": report("a", 90, {bundle(0): 500}),
        "b": report("b", 10, {}),
    }
    assert threshold_shedder(single, ShedderState(), 0.0, CONFIG) == []
    no_minimum = BrokerConfig(load_balancer_bundle_unload_min_throughput_threshold=0)
    assert [d.bundle for d in threshold_shedder(small, ShedderState(), 0.0, no_minimum)] == [bundle(0)]


def test_a_shed_bundle_is_not_shed_again_within_the_grace_period() -> None:
    state = ShedderState()
    reports = {
        "a": report("a", 90, {bundle(0): 100, bundle(1): 10, bundle(2): 10}),
        "b": report("b", 10, {}),
        "c": report("c", 10, {}),
    }
    first = threshold_shedder(reports, state, 0.0, CONFIG)
    assert [d.bundle for d in first] == [bundle(0)]
    state.recently_shed[bundle(0)] = 0.0  # the leader records what it moved
    again = threshold_shedder(reports, state, 60.0, CONFIG)
    assert bundle(0) not in [d.bundle for d in again]
    later = threshold_shedder(reports, state, 31 * 60.0, CONFIG)
    assert [d.bundle for d in later] == [bundle(0)]


def test_a_lone_broker_sheds_nothing() -> None:
    reports = {"a": report("a", 99, {bundle(0): 100, bundle(1): 100})}
    assert threshold_shedder(reports, ShedderState(), 0.0, CONFIG) == []


def test_placement_skips_overloaded_brokers_then_prefers_fewest_bundles_and_least_traffic() -> None:
    candidates = [
        Candidate("a", bundles=1, topics=5, report=LoadReport("a", cpu=90)),
        Candidate("b", bundles=2, topics=5, report=LoadReport("b", cpu=20, msg_rate_in=500)),
        Candidate("c", bundles=2, topics=5, report=LoadReport("c", cpu=25, msg_rate_in=100)),
        Candidate("d", bundles=3, topics=0, report=None),  # no report yet: counts as idle
    ]
    # a is overloaded; b and c have as many bundles: c has less traffic
    assert place(candidates, CONFIG) == "c"
    assert place(candidates, CONFIG, exclude={"c"}) == "b"
    assert place(candidates, CONFIG, exclude={"b", "c"}) == "d"
    assert place(candidates, CONFIG, exclude={"b", "c", "d"}) == "a"  # overloaded beats nothing
    assert place([], CONFIG) is None


def test_placement_spreads_bundles_over_idle_brokers() -> None:
    counts = {"a": 0, "b": 0, "c": 0}
    for _ in range(9):
        chosen = place([Candidate(b, n, 0, LoadReport(b, cpu=1)) for b, n in counts.items()], CONFIG)
        assert chosen is not None
        counts[chosen] += 1
    assert counts == {"a": 3, "b": 3, "c": 3}


def test_split_by_each_threshold_up_to_the_namespace_maximum() -> None:
    hot = {
        bundle(0): BundleStats(topics=1001),
        bundle(1): BundleStats(topics=2, producers=600, consumers=401),
        bundle(2): BundleStats(topics=2, msg_rate_in=20_000, msg_rate_out=10_001),
        bundle(3): BundleStats(topics=2, msg_throughput_in=60 * MB, msg_throughput_out=41 * MB),
        bundle(4): BundleStats(topics=1, msg_rate_in=90_000),  # one topic: cannot be split
        bundle(5): BundleStats(topics=900, msg_rate_in=100),
    }
    reports = {"a": LoadReport("a", bundles=hot)}
    splits = bundles_to_split(reports, {"public/default": 16}, CONFIG)
    assert [s.bundle for s in splits] == [bundle(0), bundle(1), bundle(2), bundle(3)]
    assert "1001 topics" in splits[0].reason
    assert "1001 sessions" in splits[1].reason
    assert bundles_to_split(reports, {"public/default": 127}, CONFIG) == splits[:1]
    assert bundles_to_split(reports, {"public/default": 128}, CONFIG) == []
    off = BrokerConfig(load_balancer_auto_bundle_split_enabled=False)
    assert bundles_to_split(reports, {"public/default": 16}, off) == []


def test_reports_round_trip() -> None:
    original = report("a", 12.5, {bundle(0): 3})
    assert LoadReport.decode(original.encode()) == original
