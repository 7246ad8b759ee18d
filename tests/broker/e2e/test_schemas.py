"""The schema registry with the official client: typed producers and consumers (Avro,
JSON, a primitive type) get 8-byte schema versions; an incompatible schema is refused under
BACKWARD and taken under ALWAYS_COMPATIBLE; older consumers read newer versions; producers may be
kept from registering schemas or from writing without one; the admin API reads, uploads, checks
and deletes schemas, and refuses bad definitions with a reason."""

from __future__ import annotations

import json
import struct
import urllib.error
import urllib.request
from pathlib import Path

import pulsar
import pytest
from click.testing import CliRunner
from pulsar.schema import AvroSchema, Integer, JsonSchema, Record, String, StringSchema

from magnetar.admin.cli import admin
from magnetar.broker.protocol import commands
from tests.broker.e2e.conftest import Standalone
from tests.broker.e2e.test_malformed import RawConnection

TOPIC = "persistent://public/default/schemas-"
NS = "/admin/v2/namespaces/public/default"


class User(Record):
    name = String()
    age = Integer()


def _user_with_email() -> type[Record]:
    """User and a field without a default: data written as User cannot be read with it."""

    class User(Record):  # the same record name: the same schema, evolved
        name = String()
        age = Integer()
        email = String(required=True)

    return User


def _user_with_nickname() -> type[Record]:
    """User and a field with a default: a BACKWARD-compatible successor of User."""

    class User(Record):
        name = String()
        age = Integer()
        nickname = String(required_default=True)  # default null

    return User


UserWithEmail = _user_with_email()
UserWithNickname = _user_with_nickname()


def _admin(server: Standalone, method: str, path: str, body: object = None) -> tuple[int, object]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"{server.web_service_url}{path}", data=data, method=method,
                                     headers={"Content-Type": "application/json"})  # fmt: skip
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            raw = response.read()
            return response.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def _version(message: pulsar.Message) -> int:
    raw = message.schema_version()
    data = raw.encode("latin-1") if isinstance(raw, str) else raw
    assert len(data) == 8, f"schema version {data!r} is not Pulsar's 8-byte version"
    return int(struct.unpack(">q", data)[0])


def test_typed_producers_and_consumers_get_versions_for_avro_json_and_string(standalone: Standalone) -> None:
    client = standalone.client()
    for suffix, schema, value in (
        ("avro", AvroSchema(User), User(name="ada", age=36)),
        ("json", JsonSchema(User), User(name="bob", age=7)),
        ("string", StringSchema(), "plain text"),
    ):
        topic = TOPIC + suffix
        consumer = client.subscribe(topic, "s", schema=schema)
        producer = client.create_producer(topic, schema=schema)
        producer.send(value)
        message = consumer.receive(10_000)
        assert message.value() == value
        assert _version(message) == 0
        status, stored = _admin(
            standalone, "GET", f"/admin/v2/schemas/public/default/schemas-{suffix}/schema"
        )
        assert status == 200
        assert isinstance(stored, dict)
        assert stored["version"] == 0
        assert stored["type"] == {"avro": "AVRO", "json": "JSON", "string": "STRING"}[suffix]
    client.close()


def test_an_incompatible_schema_is_refused_under_backward_and_taken_under_always_compatible(
    standalone: Standalone,
) -> None:
    client = standalone.client()
    topic = TOPIC + "evolve"
    client.create_producer(topic, schema=AvroSchema(User)).send(User(name="a", age=1))
    with pytest.raises(pulsar.IncompatibleSchema):
        client.create_producer(topic, schema=AvroSchema(UserWithEmail))
    with pytest.raises(pulsar.IncompatibleSchema):  # another type altogether
        client.create_producer(topic, schema=StringSchema())
    with pytest.raises(pulsar.IncompatibleSchema):  # a consumer that cannot read what was written
        client.subscribe(topic, "typed", schema=AvroSchema(UserWithEmail))
    assert _admin(standalone, "PUT", f"{NS}/schemaCompatibilityStrategy", "ALWAYS_COMPATIBLE")[0] == 204
    assert _admin(standalone, "GET", f"{NS}/schemaCompatibilityStrategy") == (200, "ALWAYS_COMPATIBLE")
    client.create_producer(topic, schema=AvroSchema(UserWithEmail)).send(
        UserWithEmail(name="b", age=2, email="e")
    )
    status, versions = _admin(standalone, "GET", "/admin/v2/schemas/public/default/schemas-evolve/schemas")
    assert status == 200
    assert isinstance(versions, dict)
    assert [v["version"] for v in versions["getSchemaResponses"]] == [0, 1]
    client.close()


def test_an_older_consumer_reads_what_a_newer_compatible_schema_wrote(standalone: Standalone) -> None:
    client = standalone.client()
    topic = TOPIC + "older-reader"
    old_consumer = client.subscribe(topic, "old", schema=AvroSchema(User))
    client.create_producer(topic, schema=AvroSchema(User)).send(User(name="v0", age=0))
    newer = client.create_producer(topic, schema=AvroSchema(UserWithNickname))  # BACKWARD: taken
    newer.send(UserWithNickname(name="v1", age=1, nickname="n"))
    first, second = old_consumer.receive(10_000), old_consumer.receive(10_000)
    assert (first.value().name, _version(first)) == ("v0", 0)
    assert (second.value().name, second.value().age, _version(second)) == ("v1", 1, 1)
    client.close()


def test_producers_kept_from_registering_and_from_writing_without_a_schema(standalone: Standalone) -> None:
    client = standalone.client()
    topic = TOPIC + "locked"
    assert _admin(standalone, "POST", f"{NS}/isAllowAutoUpdateSchema", False)[0] == 204
    with pytest.raises(pulsar.IncompatibleSchema):  # no schema may be registered by a producer
        client.create_producer(topic, schema=AvroSchema(User))
    definition = AvroSchema(User).schema_info().schema()
    upload = {"type": "AVRO", "schema": definition, "properties": {}}
    assert _admin(standalone, "POST", "/admin/v2/schemas/public/default/schemas-locked/schema", upload) == (
        200,
        {"version": {"version": 0}},
    )
    client.create_producer(topic, schema=AvroSchema(User)).send(User(name="ok", age=1))
    client.create_producer(topic).send(b"raw bytes")  # without a schema: allowed by default
    assert _admin(standalone, "POST", f"{NS}/schemaValidationEnforced", True)[0] == 204
    with pytest.raises(pulsar.IncompatibleSchema):
        client.create_producer(topic)
    client.close()


def test_the_admin_api_refuses_bad_definitions_and_deletes_schemas(standalone: Standalone) -> None:
    base = "/admin/v2/schemas/public/default/schemas-admin"
    status, reason = _admin(standalone, "POST", f"{base}/schema", {"type": "AVRO", "schema": "{not json"})
    assert status == 422
    assert "invalid AVRO schema definition" in str(reason)
    status, reason = _admin(
        standalone, "POST", f"{base}/schema", {"type": "AVRO", "schema": '{"type": "nope"}'}
    )
    assert status == 422
    status, reason = _admin(standalone, "POST", f"{base}/schema", {"type": "XML", "schema": ""})
    assert status == 422
    assert "unknown schema type 'XML'" in str(reason)
    assert _admin(standalone, "GET", f"{base}/schema")[0] == 404  # nothing was stored half-way
    user = AvroSchema(User).schema_info().schema()
    with_email = AvroSchema(UserWithEmail).schema_info().schema()
    assert _admin(standalone, "POST", f"{base}/schema", {"type": "AVRO", "schema": user})[0] == 200
    status, answer = _admin(
        standalone, "POST", f"{base}/compatibility", {"type": "AVRO", "schema": with_email}
    )
    assert status == 200
    assert isinstance(answer, dict)
    assert answer["isCompatibility"] is False
    assert answer["schemaCompatibilityStrategy"] == "BACKWARD"
    assert _admin(standalone, "POST", f"{base}/schema", {"type": "AVRO", "schema": with_email})[0] == 409
    assert _admin(standalone, "DELETE", f"{base}/schema") == (200, {"version": 1})
    assert _admin(standalone, "GET", f"{base}/schema")[0] == 404
    # after a deletion the next schema need not be compatible with what came before
    assert _admin(standalone, "POST", f"{base}/schema", {"type": "AVRO", "schema": with_email}) == (
        200,
        {"version": {"version": 2}},
    )


def test_get_schema_answers_a_version_or_says_there_is_none(standalone: Standalone) -> None:
    topic = TOPIC + "raw"
    client = standalone.client()
    client.create_producer(topic, schema=AvroSchema(User))
    client.close()
    raw = RawConnection(standalone)
    raw.connect()
    T = commands.T
    for request_id, version in ((1, struct.pack(">q", 0)), (2, None), (3, struct.pack(">q", 7))):
        raw.send(commands.command(T.GET_SCHEMA, "getSchema", request_id=request_id, topic=topic,
                                  schema_version=version))  # fmt: skip
        reply = raw.receive()
        assert reply is not None
        assert reply.type == T.GET_SCHEMA_RESPONSE
        answer = reply.getSchemaResponse
        if request_id == 3:
            assert answer.HasField("error_code")
            assert "no schema version 7" in answer.error_message
        else:
            assert answer.schema.type == 4  # Avro
            assert answer.schema_version == struct.pack(">q", 0)
            assert json.loads(answer.schema.schema_data)["name"] == "User"


def test_deleting_a_topic_deletes_its_schema(standalone: Standalone) -> None:
    client = standalone.client()
    client.create_producer(TOPIC + "gone", schema=AvroSchema(User)).send(User(name="x", age=1))
    client.close()
    assert _admin(standalone, "DELETE", "/admin/v2/persistent/public/default/schemas-gone")[0] == 204
    assert _admin(standalone, "GET", "/admin/v2/schemas/public/default/schemas-gone/schema")[0] == 404
    again = standalone.client()  # created again, the topic takes any schema
    again.create_producer(TOPIC + "gone", schema=AvroSchema(UserWithEmail))
    again.close()


def test_magnetar_admin_sets_the_strategy_and_uploads_reads_and_deletes_schemas(
    standalone: Standalone, tmp_path: Path
) -> None:
    def cli(*args: str, ok: bool = True) -> str:
        result = CliRunner().invoke(admin, ["--admin-url", standalone.web_service_url, *args])
        assert (result.exit_code == 0) is ok, result.output
        return result.output

    topic = TOPIC + "cli"
    cli("namespaces", "set-schema-compatibility-strategy", "public/default", "-c", "FULL")
    assert "FULL" in cli("namespaces", "get-schema-compatibility-strategy", "public/default")
    schema_file = tmp_path / "user.json"
    schema_file.write_text(json.dumps({"type": "AVRO", "schema": AvroSchema(User).schema_info().schema()}))
    cli("schemas", "upload", topic, "-f", str(schema_file))
    assert '"type": "AVRO"' in cli("schemas", "get", topic)
    evolved = tmp_path / "evolved.json"
    evolved.write_text(
        json.dumps({"type": "AVRO", "schema": AvroSchema(UserWithNickname).schema_info().schema()})
    )
    assert '"isCompatibility": true' in cli("schemas", "compatibility", topic, "-f", str(evolved))
    broken = tmp_path / "broken.json"
    broken.write_text('{"type": "AVRO", "schema": "{"}')
    assert "HTTP 422" in cli("schemas", "upload", topic, "-f", str(broken), ok=False)
    cli("schemas", "delete", topic)
    assert "HTTP 404" in cli("schemas", "get", topic, ok=False)
