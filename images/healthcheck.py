#!/usr/bin/env python3
"""Readiness check of a Magnetar container: ``magnetar-healthcheck bookie|broker|operator``.

bookie: its gRPC port accepts connections; broker: its HTTP port answers ``/metrics``;
operator: kopf's liveness endpoint answers. Ports come from the same environment variables the
components read (``MAGNETAR_BOOKIE_BOOKIE_PORT``, ``MAGNETAR_BROKER_WEB_SERVICE_PORT``), with the
defaults the operator renders. Exit 0 when healthy, 1 with the reason otherwise. Standard library
only, so it runs in a second even on a loaded node.
"""

from __future__ import annotations

import os
import socket
import sys
import urllib.request


def _tcp(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=3):
        pass


def _http(url: str) -> None:
    with urllib.request.urlopen(url, timeout=3) as response:
        if response.status != 200:
            raise OSError(f"{url} answered HTTP {response.status}")


def check(component: str) -> None:
    if component == "bookie":
        _tcp(int(os.environ.get("MAGNETAR_BOOKIE_BOOKIE_PORT", "3181")))
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
