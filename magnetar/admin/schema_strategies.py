"""The schema compatibility strategies (Pulsar's SchemaCompatibilityStrategy), as the admin REST
takes and answers them: named on the client side, so that ``magnetar admin`` offers them without
importing the broker, whose policies and schema checks use these same names."""

from __future__ import annotations

from typing import Literal

SchemaStrategy = Literal[
    "ALWAYS_INCOMPATIBLE",
    "ALWAYS_COMPATIBLE",
    "BACKWARD",
    "FORWARD",
    "FULL",
    "BACKWARD_TRANSITIVE",
    "FORWARD_TRANSITIVE",
    "FULL_TRANSITIVE",
]
