"""Whether a schema may follow those a topic has (Pulsar's SchemaCompatibilityStrategy).

- BACKWARD: consumers of the new schema can read what the old one wrote; FORWARD: consumers of
  the old schema can read what the new one writes; FULL: both. Against the latest schema, or
  against every schema since the last deletion for the ``_TRANSITIVE`` forms.
- ALWAYS_COMPATIBLE: anything may follow, even another type; ALWAYS_INCOMPATIBLE: nothing new.

Avro-defined types (AVRO, JSON, PROTOBUF) are checked by Apache Avro's schema-resolution rules
(its ReaderWriterCompatibilityChecker), names aside; other types only need to be of the same type.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import get_args

from avro.compatibility import (
    ReaderWriterCompatibilityChecker,
    SchemaCompatibilityType,
    SchemaIncompatibilityType,
)

from magnetar.admin.schema_strategies import SchemaStrategy
from magnetar.broker.schemas.schema_data import AVRO_DEFINED, SchemaData

STRATEGIES: tuple[str, ...] = get_args(SchemaStrategy)


class IncompatibleSchemaError(Exception):
    """The schema may not follow the topic's (Pulsar's IncompatibleSchemaException)."""


def check(new: SchemaData, existing: Sequence[SchemaData], strategy: str) -> None:
    """IncompatibleSchemaError, saying why, unless ``new`` may follow ``existing`` (oldest first)."""
    if not existing or strategy == "ALWAYS_COMPATIBLE" or any(new.same_as(e) for e in existing):
        return
    if strategy == "ALWAYS_INCOMPATIBLE":
        raise IncompatibleSchemaError("Schema compatibility strategy is ALWAYS_INCOMPATIBLE")
    direction = strategy.removesuffix("_TRANSITIVE")
    against = existing if strategy.endswith("_TRANSITIVE") else existing[-1:]
    for old in reversed(against):
        if old.type != new.type:
            raise IncompatibleSchemaError(
                f"Incompatible schema: exists schema type {old.type}, new schema type {new.type}"
            )
        if new.type in AVRO_DEFINED:
            _check_avro(old, new, direction)


def _check_avro(old: SchemaData, new: SchemaData, direction: str) -> None:
    pairs = {
        "BACKWARD": [(new, old, "the new schema cannot read data written with the existing one")],
        "FORWARD": [(old, new, "the existing schema cannot read data written with the new one")],
    }
    pairs["FULL"] = pairs["BACKWARD"] + pairs["FORWARD"]
    checker = ReaderWriterCompatibilityChecker()  # type: ignore[no-untyped-call]
    for reader, writer, meaning in pairs[direction]:
        result = checker.get_compatibility(reader.avro(), writer.avro())
        # Names are not compared, as Pulsar's check (Avro's ResolvingGrammarGenerator) does not
        # compare record names: a client's record class may be renamed between versions.
        real = [i for i in result.incompatibilities if i is not SchemaIncompatibilityType.name_mismatch]
        if result.compatibility is not SchemaCompatibilityType.compatible and real:
            detail = "; ".join(sorted(str(m) for m in result.messages)) or "incompatible"
            where = ", ".join(sorted(result.locations))
            raise IncompatibleSchemaError(f"{direction}: {meaning} (Avro: {detail}; at {where})")
