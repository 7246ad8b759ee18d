#!/usr/bin/env python3
"""Readiness check of a Magnetar container: ``magnetar-healthcheck bookie|broker|operator``.

bookie: registered in the metadata store as writable — its ``/metrics`` (served only once it has
registered) says ``bookie_SERVER_STATUS 1``, as BookKeeper's readiness (``is_ready``) asks for a
bookie that takes writes; an open gRPC port alone let an operator restart the next bookie while
the last one was not registered yet, leaving new ledgers one bookie short. broker: its HTTP port
answers ``/metrics``; operator: kopf's liveness endpoint answers. Ports come from the same
environment variables the components read (``MAGNETAR_BOOKIE_PROMETHEUS_STATS_HTTP_PORT``,
``MAGNETAR_BROKER_WEB_SERVICE_PORT``), with the defaults the operator renders. Exit 0 when
healthy, 1 with the reason otherwise. Standard library only, so it runs in a second even on a
loaded node.
"""

from __future__ import annotations

import os
import sys
import urllib.request


def _http(url: str) -> str:
    with urllib.request.urlopen(url, timeout=3) as response:
        if response.status != 200:
            raise OSError(f"{url} answered HTTP {response.status}")
        return str(response.read().decode(errors="replace"))


def _bookie_writable(port: int) -> None:
    metrics = _http(f"http://127.0.0.1:{port}/metrics")
    lines = metrics.splitlines()
    status = next((line.split()[-1] for line in lines if line.startswith("bookie_SERVER_STATUS ")), None)
    if status is None:
        raise OSError("its /metrics has no bookie_SERVER_STATUS")
    if float(status) != 1:
        raise OSError("it is read-only (bookie_SERVER_STATUS 0)")


def check(component: str) -> None:
    if component == "bookie":
        _bookie_writable(int(os.environ.get("MAGNETAR_BOOKIE_PROMETHEUS_STATS_HTTP_PORT", "8000")))
    elif component == "broker":
        _http(f"http://127.0.0.1:{os.environ.get('MAGNETAR_BROKER_WEB_SERVICE_PORT', '8080')}/metrics")
    elif component == "operator":
        _http(os.environ.get("MAGNETAR_OPERATOR_LIVENESS", "http://127.0.0.1:8080/healthz"))
    else:
        raise ValueError(f"unknown component {component!r}: expected bookie, broker or operator")


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: magnetar-healthcheck bookie|broker|operator", file=sys.stderr)
        return 2
    try:
        check(argv[1])
    except (OSError, ValueError) as exc:
        print(f"{argv[1]} not healthy: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
