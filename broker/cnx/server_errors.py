"""Which Pulsar ``ServerError`` answers a command that failed.

A client's mistake (a name that is not a topic, a namespace that does not exist) or a passing
condition of the broker (the bundle is moving, the metadata store is unreachable, the ledger is
being fenced) fails that one command; the connection, with its other producers and consumers,
goes on. Anything else is a bug of the broker's, answered too but logged with its traceback.
"""

from __future__ import annotations

from magnetar.broker.authorization import AuthorizationError
from magnetar.broker.managed_ledger import ManagedLedgerError, ManagedLedgerTerminatedError
from magnetar.broker.namespace import NamespaceError
from magnetar.broker.ownership import NotServedError, UnknownListenerError
from magnetar.broker.producer_access import ProducerBusyError, ProducerFencedError, ProducerWithdrawnError
from magnetar.broker.schemas.compatibility import IncompatibleSchemaError
from magnetar.broker.schemas.schema_data import InvalidSchemaError
from magnetar.broker.subscription import ConsumerAssignError, SubscriptionBusyError
from magnetar.broker.topic import InvalidTopicNameError, TopicNotAllowedError
from magnetar.common.metadata import MetadataError
from magnetar.proto import PulsarApi_pb2 as api

E = api.ServerError

_KNOWN: list[tuple[type[Exception], int]] = [
    (InvalidTopicNameError, E.InvalidTopicName),
    (TopicNotAllowedError, E.NotAllowedError),
    (AuthorizationError, E.AuthorizationError),
    (NamespaceError, E.TopicNotFound),
    (SubscriptionBusyError, E.ConsumerBusy),
    (ConsumerAssignError, E.ConsumerAssignError),
    (ProducerBusyError, E.ProducerBusy),
    (IncompatibleSchemaError, E.IncompatibleSchema),
    (InvalidSchemaError, E.IncompatibleSchema),
    (ProducerFencedError, E.ProducerFenced),
    # retriable: the client looks the topic up again or retries after its backoff
    (NotServedError, E.ServiceNotReady),
    (UnknownListenerError, E.ServiceNotReady),
    (ProducerWithdrawnError, E.ServiceNotReady),  # its topic went: it looks the topic up again
    (MetadataError, E.ServiceNotReady),
    (ManagedLedgerTerminatedError, E.TopicTerminatedError),
    (ManagedLedgerError, E.ServiceNotReady),
]


def server_error(exc: Exception) -> int | None:
    """The error code for a command that failed with ``exc``; None when it is a broker bug."""
    return next((code for kind, code in _KNOWN if isinstance(exc, kind)), None)
