"""The admin REST API's schemas, in Pulsar's paths and shapes (``pulsar-admin schemas``): the
latest schema, one version, all versions, upload, delete, and whether a schema would be
compatible. An upload is checked under the topic's strategy, as a producer's schema is, but is
taken even when producers may not register new schemas (``isAllowAutoUpdateSchema`` false):
that is how schemas get there then. Incompatible: 409; a definition that is not valid: 422."""

from __future__ import annotations

from aiohttp import web

from magnetar.broker.admin.http import AdminDeps, error, json_object, topic_of
from magnetar.broker.schemas.admission import schema_id
from magnetar.broker.schemas.compatibility import IncompatibleSchemaError
from magnetar.broker.schemas.schema_data import InvalidSchemaError, SchemaData
from magnetar.broker.schemas.storage import StoredSchema


def _shown(stored: StoredSchema) -> dict[str, object]:
    """Pulsar's GetSchemaResponse."""
    return {
        "version": stored.version,
        "type": stored.schema.type,
        "timestamp": stored.timestamp_ms,
        "data": stored.schema.data.decode(errors="replace"),
        "properties": stored.schema.properties,
    }


class SchemaAdminApi:
    def __init__(self, deps: AdminDeps) -> None:
        self._deps = deps
        self._registry = deps.schemas.registry

    def install(self, app: web.Application) -> None:
        r = app.router
        base = "/admin/v2/schemas/{tenant}/{namespace}/{topic}"
        r.add_get(f"{base}/schema", self.latest)
        r.add_get(f"{base}/schema/{{version}}", self.version)
        r.add_get(f"{base}/schemas", self.all_versions)
        r.add_post(f"{base}/schema", self.upload)
        r.add_delete(f"{base}/schema", self.delete)
        r.add_post(f"{base}/compatibility", self.compatibility)

    async def latest(self, request: web.Request) -> web.Response:
        name = str(topic_of(request))
        found = await self._registry.latest(schema_id(name))
        return web.json_response(_shown(found)) if found else error(404, f"{name} has no schema")

    async def version(self, request: web.Request) -> web.Response:
        name = str(topic_of(request))
        try:
            number = int(request.match_info["version"])
        except ValueError:
            return error(412, f"a schema version is a number, not {request.match_info['version']!r}")
        found = await self._registry.version(schema_id(name), number)
        return (
            web.json_response(_shown(found))
            if found
            else error(404, f"{name} has no schema version {number}")
        )

    async def all_versions(self, request: web.Request) -> web.Response:
        live = await self._registry.live(schema_id(str(topic_of(request))))
        return web.json_response({"getSchemaResponses": [_shown(s) for s in live]})

    async def upload(self, request: web.Request) -> web.Response:
        name = str(topic_of(request))
        try:
            schema = await _payload(request)
            strategy = await self._deps.schemas.strategy(name)
            version = await self._registry.register(schema_id(name), schema, strategy, auto_update=True)
        except InvalidSchemaError as exc:
            return error(422, str(exc))
        except IncompatibleSchemaError as exc:
            return error(409, str(exc))
        return web.json_response({"version": {"version": version}})

    async def delete(self, request: web.Request) -> web.Response:
        version = await self._registry.delete(schema_id(str(topic_of(request))))
        return web.json_response({"version": version})

    async def compatibility(self, request: web.Request) -> web.Response:
        name = str(topic_of(request))
        strategy = await self._deps.schemas.strategy(name)
        try:
            await self._registry.check(schema_id(name), await _payload(request), strategy)
        except InvalidSchemaError as exc:
            return error(422, str(exc))
        except IncompatibleSchemaError as exc:
            return web.json_response(
                {"isCompatibility": False, "schemaCompatibilityStrategy": strategy, "reason": str(exc)}
            )
        return web.json_response({"isCompatibility": True, "schemaCompatibilityStrategy": strategy})


async def _payload(request: web.Request) -> SchemaData:
    """Pulsar's PostSchemaPayload: ``{"type": "AVRO", "schema": "<definition>", "properties": {}}``."""
    body = await json_object(request)
    return SchemaData.from_admin(body.get("type"), body.get("schema", ""), body.get("properties") or {})
