"""One typed configuration object per process, loaded from file, environment and flags.

Precedence, lowest to highest: the model's defaults (Pulsar's or BookKeeper's where such a setting
exists, same name in snake_case), a YAML file, environment variables ``<PREFIX>_<FIELD>`` (upper
case), then explicit overrides (command-line flags). Unknown keys are errors, never ignored.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

T = TypeVar("T", bound="ComponentConfig")


class ConfigError(Exception):
    """A configuration that cannot be used; the message names the source and the key."""


class ComponentConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    #: environment prefix, e.g. ``MAGNETAR_BOOKIE``; subclasses set it
    env_prefix: str = ""

    @classmethod
    def load(
        cls: type[T],
        path: str | Path | None = None,
        overrides: dict[str, Any] | None = None,
        environ: dict[str, str] | None = None,
    ) -> T:
        values: dict[str, Any] = {}
        if path is not None:
            values.update(_read_file(Path(path)))
        values.update(_from_env(cls, os.environ if environ is None else environ))
        values.update({k: v for k, v in (overrides or {}).items() if v is not None})
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            source = f" (file {path})" if path else ""
            raise ConfigError(f"invalid {cls.__name__}{source}:\n{exc}") from exc


def _read_file(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise ConfigError(f"cannot read configuration file {path}: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"configuration file {path} is not valid YAML: {exc}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"configuration file {path} must hold a mapping, not {type(data).__name__}")
    return data


def _from_env(cls: type[ComponentConfig], environ: dict[str, str] | os._Environ[str]) -> dict[str, Any]:
    prefix = cls.model_fields["env_prefix"].default
    if not prefix:
        return {}
    found: dict[str, Any] = {}
    for name in cls.model_fields:
        key = f"{prefix}_{name.upper()}"
        if key in environ:
            # YAML parsing gives "true"/"3"/"[a, b]" their natural types; pydantic validates.
            found[name] = yaml.safe_load(environ[key])
    return found
