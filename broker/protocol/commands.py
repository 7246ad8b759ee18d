"""Builders for the commands the broker sends, so handlers read as what they answer."""

from __future__ import annotations

from typing import TYPE_CHECKING

from google.protobuf.message import Message

from magnetar.proto import PulsarApi_pb2 as api


class _CommandTypes:
    """``BaseCommand.Type`` with its values as plain attributes. protobuf's enum wrapper finds
    each value through a Python ``__getattr__``, and every frame's handling reads several."""

    def __init__(self) -> None:
        wrapper = api.BaseCommand.Type
        self.__dict__.update(wrapper.items())
        self.Name = wrapper.Name
        self.Value = wrapper.Value
        self.items = wrapper.items
        self.values = wrapper.values
        self.keys = wrapper.keys


if TYPE_CHECKING:
    T = api.BaseCommand.Type
else:
    T = _CommandTypes()


def command(kind: int, field: str, **values: object) -> api.BaseCommand:
    base = api.BaseCommand(type=kind)  # type: ignore[arg-type]
    getattr(base, field).SetInParent()
    for key, value in values.items():
        if value is None:
            continue
        target = getattr(base, field)
        if isinstance(value, Message):  # a sub-message (MessageIdData, AuthData) is copied in
            getattr(target, key).CopyFrom(value)
        elif isinstance(value, list):
            getattr(target, key).extend(value)
        else:
            setattr(target, key, value)
    return base


def send_receipt(
    producer_id: int, sequence_id: int, ledger_id: int, entry_id: int, highest_sequence_id: int
) -> api.BaseCommand:
    """A SEND_RECEIPT, built in one go: it answers every message a producer sends."""
    return api.BaseCommand(
        type=T.SEND_RECEIPT,
        send_receipt=api.CommandSendReceipt(
            producer_id=producer_id,
            sequence_id=sequence_id,
            message_id=message_id(ledger_id, entry_id),
            highest_sequence_id=highest_sequence_id,
        ),
    )


def message_id(
    ledger_id: int, entry_id: int, partition: int = -1, batch_index: int = -1
) -> api.MessageIdData:
    # The wire type is uint64: -1 (an unknown or "earliest" id) travels as 2**64 - 1.
    return api.MessageIdData(
        ledgerId=ledger_id % 2**64, entryId=entry_id % 2**64, partition=partition, batch_index=batch_index
    )


def signed(value: int) -> int:
    """A uint64 id field read back as the signed long Pulsar means (-1 for 2**64 - 1)."""
    return value - 2**64 if value >= 2**63 else value


def error(request_id: int, code: int, message: str) -> api.BaseCommand:
    return command(T.ERROR, "error", request_id=request_id, error=code, message=message)


def send_error(send: api.CommandSend, code: int, message: str) -> api.BaseCommand:
    """The SEND_ERROR answering ``send``."""
    return command(
        T.SEND_ERROR,
        "send_error",
        producer_id=send.producer_id,
        sequence_id=send.sequence_id,
        error=code,
        message=message,
    )


def success(request_id: int) -> api.BaseCommand:
    return command(T.SUCCESS, "success", request_id=request_id)


def ping() -> api.BaseCommand:
    return command(T.PING, "ping")


def pong() -> api.BaseCommand:
    return command(T.PONG, "pong")
