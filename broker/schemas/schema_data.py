"""A schema as the registry keeps it (Pulsar's SchemaData): its type by Pulsar's name, its
definition and its properties; from and to the wire's ``Schema``; and whether a definition is
valid for its type.

Avro, JSON and Protobuf (not native) schemas are defined by an Avro schema, which must parse
(Pulsar's StructSchemaDataValidator)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, cast

import avro.errors
import avro.schema

from magnetar.proto import PulsarApi_pb2 as api

#: the wire's type numbers by Pulsar's SchemaType names (AutoConsume, 21, is no stored schema)
TYPE_NAMES: dict[int, str] = {
    0: "NONE", 1: "STRING", 2: "JSON", 3: "PROTOBUF", 4: "AVRO", 5: "BOOLEAN", 6: "INT8",
    7: "INT16", 8: "INT32", 9: "INT64", 10: "FLOAT", 11: "DOUBLE", 12: "DATE", 13: "TIME",
    14: "TIMESTAMP", 15: "KEY_VALUE", 16: "INSTANT", 17: "LOCAL_DATE", 18: "LOCAL_TIME",
    19: "LOCAL_DATE_TIME", 20: "PROTOBUF_NATIVE",
}  # fmt: skip
TYPE_NUMBERS = {name: number for number, name in TYPE_NAMES.items()}
#: types whose definition is an Avro schema (checked for compatibility as Avro)
AVRO_DEFINED = frozenset({"AVRO", "JSON", "PROTOBUF"})


class InvalidSchemaError(ValueError):
    """A schema whose type is unknown or whose definition does not fit its type."""


@dataclass(frozen=True)
class SchemaData:
    type: str
    data: bytes
    properties: dict[str, str] = field(default_factory=dict, hash=False)

    @classmethod
    def from_wire(cls, schema: api.Schema) -> SchemaData:
        name = TYPE_NAMES.get(schema.type)
        if name is None:
            raise InvalidSchemaError(f"unknown schema type {schema.type}")
        # (the generated stub takes the enum value Schema.KeyValue for the message KeyValue)
        pairs = cast("list[api.KeyValue]", list(schema.properties))
        return cls(name, schema.schema_data, {p.key: p.value for p in pairs})

    @classmethod
    def from_admin(cls, kind: object, definition: object, properties: object) -> SchemaData:
        """From Pulsar's PostSchemaPayload fields: the type's name, the definition as text."""
        if not isinstance(kind, str) or kind.upper() not in TYPE_NUMBERS:
            raise InvalidSchemaError(f"unknown schema type {kind!r}; one of {', '.join(TYPE_NUMBERS)}")
        if not isinstance(definition, str):
            raise InvalidSchemaError("the schema definition ('schema') must be a string")
        if not isinstance(properties, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in properties.items()
        ):
            raise InvalidSchemaError("'properties' must be an object of strings")
        return cls(kind.upper(), definition.encode(), dict(properties))

    def to_wire(self, name: str) -> api.Schema:
        schema = api.Schema(name=name, schema_data=self.data, type=TYPE_NUMBERS[self.type])  # type: ignore[arg-type]
        properties = cast("Any", schema.properties)
        for key, value in sorted(self.properties.items()):
            properties.add(key=key, value=value)
        return schema

    def same_as(self, other: SchemaData) -> bool:
        """The same schema (Pulsar's SchemaHash): type, definition and properties."""
        return (self.type, self.data, self.properties) == (other.type, other.data, other.properties)

    def validate(self) -> None:
        """InvalidSchemaError when the definition does not fit the type."""
        if self.type in AVRO_DEFINED:
            self.avro()
        # A primitive type's definition is not looked at: the official Python client sends
        # "null" for it (json.dumps of None).

    def avro(self) -> avro.schema.Schema:
        """The Avro schema defining this one (AVRO, JSON, PROTOBUF)."""
        try:
            return avro.schema.parse(self.data.decode())
        except (UnicodeDecodeError, json.JSONDecodeError, avro.errors.AvroException) as exc:
            raise InvalidSchemaError(f"invalid {self.type} schema definition: {exc}") from None
