"""Where the storage layer keeps its state in the metadata store (architecture §4).

    /bookies/writable/<bookie-id>   ephemeral, JSON BookieRegistration, while the bookie accepts adds
    /bookies/readonly/<bookie-id>   ephemeral, instead of the above while the bookie is read-only
    /ledgers/L<id, 19 digits>       persistent, JSON ledger metadata (bookie/client/ledger_metadata.py)
    /ledgers-idgen/id-<seq>         transient sequential nodes that allocate ledger ids
    /underreplicated/L<id>          persistent, JSON mark: which bookies of the ledger need replacing
    /underreplicated-locks/L<id>    ephemeral, held by the replication worker recovering the ledger
    /autorecovery/auditor/n_<seq>   leader election of the auditor
    /autorecovery/audit-requested   its value changes when someone asks for an audit now

Bookie ids are ``host:port`` unless configured otherwise. The shapes follow BookKeeper's
``/ledgers/available`` and ``/ledgers/available/readonly`` with clearer names.
"""

from __future__ import annotations

import functools
import json
from dataclasses import asdict, dataclass, fields

WRITABLE_BOOKIES = "/bookies/writable"
READONLY_BOOKIES = "/bookies/readonly"
LEDGERS = "/ledgers"
LEDGER_ID_GENERATOR = "/ledgers-idgen"
UNDER_REPLICATED = "/underreplicated"
REPLICATION_LOCKS = "/underreplicated-locks"
AUDITOR_ELECTION = "/autorecovery/auditor"
AUDIT_REQUESTED = "/autorecovery/audit-requested"


def ledger_path(ledger_id: int) -> str:
    return f"{LEDGERS}/{ledger_name(ledger_id)}"


def ledger_name(ledger_id: int) -> str:
    return f"L{ledger_id:019d}"


def ledger_id_from_name(name: str) -> int | None:
    """The ledger id of a child name of LEDGERS, or None for anything else."""
    if len(name) == 20 and name[0] == "L" and name[1:].isdigit():
        return int(name[1:])
    return None


#: rack of a bookie that names none (BookKeeper's default)
DEFAULT_RACK = "/default-rack"


@dataclass(frozen=True)
class BookieRegistration:
    bookie_id: str
    address: str  # host:port of the gRPC service
    rack: str = DEFAULT_RACK
    #: host:port of the framed add port (``bookie/frames.py``); empty: adds go over gRPC
    add_address: str = ""
    #: the IP address behind the hosts above, for clients to connect to without resolving them
    #: (they still check TLS against the host names); empty: clients resolve the names
    ip: str = ""

    def encode(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def decode(cls, data: bytes) -> BookieRegistration:
        """A registration; fields this version does not know (a newer bookie's) are left out."""
        return _decode_registration(bytes(data))

    def same_bookie(self, other: BookieRegistration) -> bool:
        """Whether ``other`` is this bookie's registration, perhaps from an earlier run of it (an
        add port picked at start, or a pod's IP, may differ from run to run)."""
        return (self.bookie_id, self.address) == (other.bookie_id, other.address)


@functools.lru_cache(maxsize=1024)
def _decode_registration(data: bytes) -> BookieRegistration:
    # Kept by content: every new ledger and ensemble change reads every writable bookie's
    # registration, which changes only when a bookie restarts (the object is frozen, so shared).
    known = {f.name for f in fields(BookieRegistration)}
    return BookieRegistration(**{k: v for k, v in json.loads(data).items() if k in known})
