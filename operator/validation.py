"""A MagnetarCluster spec as the operator accepts it: the typed models (resources.py), then the
checks a schema cannot make, the last of them rendering the configs the pods will load
(configs.py), so an unknown or invalid setting is reported on the resource instead of as a
crash-looping pod."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from magnetar.operator.configs import bookie_settings, broker_settings, reserved
from magnetar.operator.resources import ClusterSpec, SpecError, check_ledgers, first_error


def parse_cluster(spec: dict[str, Any], name: str) -> ClusterSpec:
    """The typed spec, after the checks a schema cannot make."""
    try:
        parsed = ClusterSpec.model_validate(spec)
    except ValidationError as exc:
        raise SpecError("InvalidSpec", first_error(exc)) from None
    if parsed.external is None:
        check_ledgers(parsed.bookies)
        _check_autoscaling(parsed)
        _check_settings(parsed, name)
    return parsed


def _check_autoscaling(spec: ClusterSpec) -> None:
    scaling = spec.brokers.autoscaling
    if scaling is not None and scaling.target.type == "CPU" and "cpu" not in spec.brokers.resources.requests:
        raise SpecError(
            "InvalidAutoscaling",
            "brokers.autoscaling.target CPU needs brokers.resources.requests.cpu: an HPA's CPU "
            "utilization is a percent of the pods' request",
        )


def _check_settings(spec: ClusterSpec, name: str) -> None:
    for component, names in reserved(spec).items():
        given = getattr(spec, component).config
        taken = sorted(names & set(given))
        if taken:
            raise SpecError(
                "InvalidConfig",
                f"{component}.config.{taken[0]} is set by the operator from spec.auth/spec.tls "
                "(the files of the Secrets it mounts); turn those off to set it yourself",
            )
    for component, render in (("bookies", bookie_settings), ("brokers", broker_settings)):
        try:
            render(spec, name, "default")
        except ValidationError as exc:
            raise SpecError("InvalidConfig", f"{component}.config: {first_error(exc)}") from None
