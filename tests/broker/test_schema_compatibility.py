"""The compatibility strategies on their own (Avro's resolution rules through Apache Avro)."""

from __future__ import annotations

import json

import pytest

from magnetar.broker.schemas.compatibility import STRATEGIES, IncompatibleSchemaError, check
from magnetar.broker.schemas.schema_data import InvalidSchemaError, SchemaData


def avro(*fields: dict[str, object]) -> SchemaData:
    doc = {"type": "record", "name": "User", "fields": [{"name": "name", "type": "string"}, *fields]}
    return SchemaData("AVRO", json.dumps(doc).encode())


V1 = avro()
WITH_DEFAULT = avro({"name": "age", "type": "int", "default": 0})
WITHOUT_DEFAULT = avro({"name": "age", "type": "int"})
#: a field's type changed so that neither side can read the other
RETYPED = avro({"name": "age", "type": "string", "default": "0"})


@pytest.mark.parametrize(
    ("strategy", "new", "allowed"),
    [
        ("BACKWARD", WITH_DEFAULT, True),  # a new reader fills the default
        ("BACKWARD", WITHOUT_DEFAULT, False),  # a new reader cannot read old data
        ("FORWARD", WITHOUT_DEFAULT, True),  # an old reader ignores the new field
        ("FULL", WITH_DEFAULT, True),
        ("FULL", WITHOUT_DEFAULT, False),
        ("ALWAYS_COMPATIBLE", WITHOUT_DEFAULT, True),
        ("ALWAYS_INCOMPATIBLE", WITH_DEFAULT, False),
    ],
)
def test_against_the_latest_schema(strategy: str, new: SchemaData, allowed: bool) -> None:
    if allowed:
        check(new, [V1], strategy)
    else:
        with pytest.raises(IncompatibleSchemaError):
            check(new, [V1], strategy)


def test_transitive_strategies_check_every_version_the_others_only_the_latest() -> None:
    history = [RETYPED, V1]  # RETYPED, then a schema without the field at all
    check(WITH_DEFAULT, history, "BACKWARD")  # V1 -> WITH_DEFAULT is fine
    with pytest.raises(IncompatibleSchemaError, match="BACKWARD"):
        check(WITH_DEFAULT, history, "BACKWARD_TRANSITIVE")  # RETYPED's age is a string


def test_identical_schemas_pass_under_every_strategy_and_types_must_match() -> None:
    for strategy in STRATEGIES:
        check(V1, [V1], strategy)
    with pytest.raises(IncompatibleSchemaError, match="exists schema type AVRO, new schema type STRING"):
        check(SchemaData("STRING", b""), [V1], "FULL")
    check(SchemaData("STRING", b""), [V1], "ALWAYS_COMPATIBLE")


def test_definitions_that_are_not_avro_are_refused_with_the_reason() -> None:
    with pytest.raises(InvalidSchemaError, match="invalid JSON schema definition"):
        SchemaData("JSON", b'{"type": "record", "name": "R"}').validate()  # no fields
    with pytest.raises(InvalidSchemaError, match="invalid AVRO schema definition"):
        SchemaData("AVRO", b"\xff\xfe").validate()
    SchemaData("STRING", b"null").validate()  # what the Python client sends for primitives


def test_record_names_are_not_compared_as_in_pulsar() -> None:
    renamed = json.loads(WITH_DEFAULT.data)
    renamed["name"] = "UserV2"
    check(SchemaData("AVRO", json.dumps(renamed).encode()), [V1], "FULL")
