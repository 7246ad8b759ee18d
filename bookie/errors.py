"""Reasons a bookie request fails, shared by server and client (``Reason`` in bookie.proto)."""

from __future__ import annotations

#: trailing-metadata key that carries the Reason name on failed unary RPCs
REASON_METADATA_KEY = "magnetar-reason"
