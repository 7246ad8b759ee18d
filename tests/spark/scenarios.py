"""Scenarios with known answers for the post-mortem tests (see magnetar.spark.synthetic)."""

from __future__ import annotations

from magnetar.spark.synthetic import ConsumerSpec, FaultSpec, Scenario, Stall, TopicSpec

UNLOAD, KILL = "unload-orders", "kill-consumer-broker"

#: one of everything: a producer stall overlapping an unload, a consumer stall just after a kill
#: (attributed to the fault that precedes it), same-region redeliveries, a failover to another
#: region with duplicates, two losses, swapped deliveries, a consumer stopped early, a topic stalled
#: from its first send
GOLDEN = Scenario(
    run="golden",
    topics=(
        TopicSpec(
            "orders",
            "p-orders",
            1000,
            stalls=(Stall(1003, 1300, UNLOAD),),
            consumers=(
                ConsumerSpec(
                    "c-a",
                    "sub-a",
                    stalls=(Stall(3005, 3400, KILL),),
                    redeliver=(100, 101),
                    switch_at=400,
                    failover_dups=(396, 397, 398),
                    lose=(500, 501),
                    swap=((200, 204), (250, 251)),
                ),
                ConsumerSpec("c-b", "sub-b", stop_after=200, lose=(150,)),
            ),
        ),
        # held from its very first send, before any fault: a window at the start, attributed to none
        TopicSpec(
            "audit",
            "p-audit",
            300,
            interval_ms=20,
            stalls=(Stall(0, 200),),
            consumers=(ConsumerSpec("c-c", "sub-c"),),
        ),
    ),
    faults=(FaultSpec(UNLOAD, 1000, 1050), FaultSpec(KILL, 2900, 3000)),
)

#: small and quick, for the property tests: still a window, a duplicate, a loss and a reorder
SMALL = Scenario(
    run="small",
    topics=(
        TopicSpec(
            "t",
            "p",
            300,
            stalls=(Stall(503, 700, "unload"),),
            consumers=(ConsumerSpec("c", "s", redeliver=(10,), lose=(250,), swap=((100, 101),)),),
        ),
    ),
    faults=(FaultSpec("unload", 500, 520),),
)

#: nothing goes wrong
CLEAN = Scenario(
    run="clean",
    topics=(TopicSpec("t", "p", 200, consumers=(ConsumerSpec("c", "s"),)),),
)

OUTAGE, RESTORE = "region-outage", "restore-region"

#: make demo's region-outage, in small: the producer stalls 4 ms after a region is frozen and
#: stays stalled until after the region is restored, so its window overlaps the restore's
#: activity; it is still the outage's. The consumer's later stall begins after the restore
#: began: the restore's.
REGION_OUTAGE = Scenario(
    run="region-outage",
    topics=(
        TopicSpec(
            "orders",
            "p-orders",
            1000,
            stalls=(Stall(5004, 6200, OUTAGE),),
            consumers=(ConsumerSpec("c-a", "sub-a", stalls=(Stall(6500, 6900, RESTORE),)),),
        ),
    ),
    faults=(FaultSpec(OUTAGE, 5000, 5010), FaultSpec(RESTORE, 6000, 6020)),
)

CHECKED_FAULT = "unload"

#: nothing goes wrong, on a version-2 log: one subscription of each type on one topic, payload
#: digests on every send and receipt. The checkers' mutation tests plant one fault each in it.
CHECKED = Scenario(
    run="checked",
    topics=(
        TopicSpec(
            "orders",
            "p-orders",
            200,
            keys=4,
            digests=True,
            consumers=(
                ConsumerSpec("c-ex", "sub-ex", sub_type="Exclusive"),
                ConsumerSpec("c-fo", "sub-fo", sub_type="Failover"),
                ConsumerSpec("c-ks", "sub-ks", sub_type="KeyShared"),
                ConsumerSpec("c-sh", "sub-sh", sub_type="Shared"),
            ),
        ),
    ),
    faults=(FaultSpec(CHECKED_FAULT, 800, 820),),
)
