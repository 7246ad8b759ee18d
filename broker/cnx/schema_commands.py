"""The schema commands of a connection: GET_SCHEMA (a version, or the latest) and
GET_OR_CREATE_SCHEMA (what a client registers before it writes with a new schema), answered
from the schema registry (broker/schemas/)."""

from __future__ import annotations

from magnetar.broker.cnx.channel import CommandChannel
from magnetar.broker.protocol import commands
from magnetar.broker.protocol.commands import T
from magnetar.broker.protocol.frames import Frame
from magnetar.broker.schemas.admission import SchemaAdmission
from magnetar.broker.schemas.compatibility import IncompatibleSchemaError
from magnetar.broker.schemas.registry import encode_version
from magnetar.broker.schemas.schema_data import InvalidSchemaError
from magnetar.broker.topic import InvalidTopicNameError
from magnetar.proto import PulsarApi_pb2 as api

E = api.ServerError


class SchemaCommands:
    def __init__(self, channel: CommandChannel, schemas: SchemaAdmission) -> None:
        self._channel = channel
        self._schemas = schemas

    async def get_schema(self, frame: Frame) -> None:
        request = frame.command.getSchema
        version = request.schema_version if request.HasField("schema_version") else None
        try:
            found, why_not = await self._schemas.get(request.topic, version)
        except InvalidTopicNameError as exc:
            found, why_not = None, str(exc)
        if found is None:
            reply = commands.command(
                T.GET_SCHEMA_RESPONSE,
                "getSchemaResponse",
                request_id=request.request_id,
                error_code=E.TopicNotFound,
                error_message=why_not,
            )
        else:
            reply = commands.command(
                T.GET_SCHEMA_RESPONSE,
                "getSchemaResponse",
                request_id=request.request_id,
                schema_version=encode_version(found.version),
            )
            reply.getSchemaResponse.schema.CopyFrom(found.schema.to_wire(request.topic))
        self._channel.send(reply)

    async def get_or_create_schema(self, frame: Frame) -> None:
        request = frame.command.getOrCreateSchema
        try:
            version = await self._schemas.for_producer(request.topic, request.schema)
        except (IncompatibleSchemaError, InvalidSchemaError, InvalidTopicNameError) as exc:
            self._channel.send(
                commands.command(
                    T.GET_OR_CREATE_SCHEMA_RESPONSE,
                    "getOrCreateSchemaResponse",
                    request_id=request.request_id,
                    error_code=E.IncompatibleSchema,
                    error_message=str(exc),
                )
            )
            return
        self._channel.send(
            commands.command(
                T.GET_OR_CREATE_SCHEMA_RESPONSE,
                "getOrCreateSchemaResponse",
                request_id=request.request_id,
                schema_version=version,
            )
        )
