"""Individually acknowledged ranges against a plain set of positions."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from magnetar.broker.managed_ledger.acked_ranges import AckedRanges
from magnetar.broker.managed_ledger.position import Position

# Two ledgers: 1 holds entries 0..9, 3 holds 0..9 (ledger 2 was empty and is gone).
ENTRIES = [Position(1, e) for e in range(10)] + [Position(3, e) for e in range(10)]


def successor(position: Position) -> Position:
    later = [p for p in ENTRIES if p > position]
    return later[0] if later else Position(3, 10)


@given(st.lists(st.sampled_from(ENTRIES)), st.sampled_from([Position(1, -1), *ENTRIES]))
def test_ranges_hold_exactly_the_acknowledged_positions(acks: list[Position], cut: Position) -> None:
    ranges = AckedRanges(successor)
    for position in acks:
        ranges.add(position)
    assert {p for p in ENTRIES if p in ranges} == set(acks)
    assert ranges.count(lambda a, b: sum(1 for p in ENTRIES if a <= p <= b)) == len(set(acks))
    # Ranges never touch: a gap (an unacknowledged entry) separates any two.
    spans = ranges.ranges()
    assert all(successor(last) < first for (_, last), (first, _) in itertools.pairwise(spans))
    ranges.drop_through(cut)
    assert {p for p in ENTRIES if p in ranges} == {p for p in acks if p > cut}


def test_ranges_join_across_ledgers_and_fold_into_mark_delete() -> None:
    ranges = AckedRanges(successor)
    for position in (Position(1, 9), Position(3, 1), Position(3, 0)):
        ranges.add(position)
    assert ranges.ranges() == [(Position(1, 9), Position(3, 1))]
    assert ranges.pop_following(Position(1, 7)) is None
    assert ranges.pop_following(Position(1, 8)) == Position(3, 1)
    assert len(ranges) == 0
