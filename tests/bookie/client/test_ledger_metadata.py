"""Ledger metadata: striping, ensembles by first entry, the stored form, and bad input."""

from __future__ import annotations

import pytest

from magnetar.bookie.client.ledger_metadata import LedgerMetadata, LedgerState
from magnetar.bookie.client.recovery import _covers_every_ack_quorum


def metadata(e: int = 3, qw: int = 2, qa: int = 2) -> LedgerMetadata:
    bookies = tuple(f"b{i}" for i in range(e))
    return LedgerMetadata(ensemble_size=e, write_quorum=qw, ack_quorum=qa, ensembles=((0, bookies),))


def test_entries_are_striped_round_robin_over_the_ensemble() -> None:
    md = metadata(3, 2, 2)
    assert [md.write_set(e) for e in range(4)] == [["b0", "b1"], ["b1", "b2"], ["b2", "b0"], ["b0", "b1"]]
    # every bookie stores Qw/E of the entries: the load is spread evenly
    counts = {b: 0 for b in ("b0", "b1", "b2")}
    for entry in range(300):
        for bookie in md.write_set(entry):
            counts[bookie] += 1
    assert set(counts.values()) == {200}


def test_ensemble_change_applies_from_its_first_entry() -> None:
    md = metadata().with_ensemble(10, ("b0", "b9", "b2"))
    assert md.ensemble_for(9) == ("b0", "b1", "b2")
    assert md.ensemble_for(10) == ("b0", "b9", "b2")
    assert md.write_set(10) == ["b9", "b2"]
    # a second change at the same first entry replaces the unused ensemble instead of stacking
    again = md.with_ensemble(10, ("b0", "b8", "b2"))
    assert [first for first, _ in again.ensembles] == [0, 10]
    assert again.ensemble_for(10) == ("b0", "b8", "b2")


def test_stored_form_round_trips() -> None:
    md = metadata().with_ensemble(5, ("b0", "b7", "b2")).closed_at(41, 4096)
    back = LedgerMetadata.decode(md.encode())
    assert back == md
    assert back.state is LedgerState.CLOSED
    assert back.last_entry_id == 41


@pytest.mark.parametrize(("e", "qw", "qa"), [(2, 3, 2), (3, 2, 3), (3, 3, 0)])
def test_impossible_quorums_are_refused(e: int, qw: int, qa: int) -> None:
    with pytest.raises(ValueError, match="ensemble size >= write quorum >= ack quorum"):
        metadata(e, qw, qa)


def test_duplicate_bookie_in_an_ensemble_is_refused() -> None:
    with pytest.raises(ValueError, match="distinct bookies"):
        LedgerMetadata(ensemble_size=2, write_quorum=2, ack_quorum=2, ensembles=((0, ("b0", "b0")),))


@pytest.mark.parametrize("data", [b"not json", b'{"format": 99}', b'{"format": 1, "ensemble_size": 3}'])
def test_unreadable_metadata_names_the_ledger(data: bytes) -> None:
    with pytest.raises(ValueError, match="ledger 17: unreadable metadata"):
        LedgerMetadata.decode(data, ledger_id=17)


def test_fencing_must_reach_every_write_set() -> None:
    md = metadata(3, 2, 2)  # any one answer per write set is enough when Qw == Qa
    assert _covers_every_ack_quorum(md, {0, 1})
    assert not _covers_every_ack_quorum(md, {0})  # write set {1, 2} has no answer
    md = metadata(3, 3, 2)  # Qw - Qa + 1 = 2 answers needed in each write set
    assert _covers_every_ack_quorum(md, {0, 2})
    assert not _covers_every_ack_quorum(md, {1})
