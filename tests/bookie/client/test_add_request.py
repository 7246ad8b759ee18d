"""AddRequests put together from entries serialized once parse back to the request protobuf
would have built: every entry, the recovery flag, every ledger's master key."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from magnetar.bookie.client.add_request import EncodedEntry, encode, varint
from magnetar.proto import bookie_pb2 as pb

INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
entries = st.builds(
    pb.Entry,
    ledger_id=INT64,
    entry_id=INT64,
    last_add_confirmed=INT64,
    digest=st.integers(min_value=0, max_value=2**32 - 1),
    payload=st.binary(max_size=3000),
)


@given(
    st.lists(entries, max_size=8), st.booleans(), st.dictionaries(INT64, st.binary(max_size=40), max_size=4)
)
def test_an_assembled_request_parses_to_the_one_protobuf_builds(
    given_entries: list[pb.Entry], recovery: bool, keys: dict[int, bytes]
) -> None:
    data = encode([EncodedEntry.of(e).data for e in given_entries], recovery, keys)
    assert pb.AddRequest.FromString(data) == pb.AddRequest(
        entries=given_entries, recovery=recovery, master_keys=keys
    )


@given(st.integers(min_value=-(2**63), max_value=2**64 - 1))
def test_varints_are_protobufs(value: int) -> None:
    parsed = pb.Entry.FromString(b"\x08" + varint(value))  # field 1, int64
    assert parsed.ledger_id == (value if value < 2**63 else value - 2**64)


def test_an_encoded_entry_keeps_its_ids() -> None:
    entry = pb.Entry(ledger_id=7, entry_id=9, payload=b"x")
    assert EncodedEntry.of(entry)[:2] == (7, 9)
