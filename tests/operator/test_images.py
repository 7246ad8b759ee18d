"""The image's entrypoint and health check, run as a pod would run them."""

from __future__ import annotations

import http.server
import os
import subprocess
import sys
import threading
from pathlib import Path

from tests.operator.conftest import ROOT

ENTRYPOINT = ROOT / "images" / "entrypoint.sh"
HEALTHCHECK = ROOT / "images" / "healthcheck.py"


def run_entrypoint(tmp_path: Path, env: dict[str, str], *args: str) -> dict[str, str]:
    """Run the entrypoint with a stand-in `magnetar` that prints its arguments and environment."""
    fake = tmp_path / "magnetar"
    fake.write_text('#!/bin/sh\necho "ARGS=$*"\nenv\n')
    fake.chmod(0o755)
    out = subprocess.run(
        ["sh", str(ENTRYPOINT), *args],
        env={"PATH": f"{tmp_path}:/usr/bin:/bin", **env},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def test_a_bookie_pod_gets_its_stable_address_and_its_rack(tmp_path: Path) -> None:
    pod = {"POD_NAME": "region-a-bookie-3", "POD_NAMESPACE": "prod", "MAGNETAR_SERVICE": "region-a-bookie",
           "MAGNETAR_RACKS": "/rack-1,/rack-2"}  # fmt: skip
    env = run_entrypoint(tmp_path, pod, "bookie", "--config", "/etc/magnetar/bookie.yaml")
    assert env["ARGS"] == "bookie --config /etc/magnetar/bookie.yaml"
    assert env["MAGNETAR_BOOKIE_ADVERTISED_ADDRESS"] == "region-a-bookie-3.region-a-bookie.prod.svc"
    assert env["MAGNETAR_BOOKIE_RACK"] == "/rack-2"  # ordinal 3 of 2 racks


def test_explicit_settings_win_and_brokers_get_their_address(tmp_path: Path) -> None:
    pod = {"POD_NAME": "c-broker-0", "POD_NAMESPACE": "ns", "MAGNETAR_SERVICE": "c-broker-headless"}
    env = run_entrypoint(tmp_path, pod, "broker")
    assert env["MAGNETAR_BROKER_ADVERTISED_ADDRESS"] == "c-broker-0.c-broker-headless.ns.svc"
    env = run_entrypoint(tmp_path, pod | {"MAGNETAR_BROKER_ADVERTISED_ADDRESS": "me"}, "broker")
    assert env["MAGNETAR_BROKER_ADVERTISED_ADDRESS"] == "me"


def _metrics_server(body: str) -> tuple[http.server.HTTPServer, int]:
    class Metrics(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Metrics)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, server.server_address[1]


def bookie_health(port: int) -> subprocess.CompletedProcess[str]:
    env = os.environ | {"MAGNETAR_BOOKIE_PROMETHEUS_STATS_HTTP_PORT": str(port)}
    return subprocess.run(
        [sys.executable, str(HEALTHCHECK), "bookie"], env=env, capture_output=True, text=True
    )


def test_a_bookie_is_ready_once_registered_writable_not_when_its_port_opens() -> None:
    # /metrics is served only after the bookie registered; SERVER_STATUS says writable or not.
    for body, healthy, reason in (
        ("bookie_SERVER_STATUS 1.0\n", True, ""),
        ("bookie_SERVER_STATUS 0.0\n", False, "read-only"),
        ("bookkeeper_server_ADD_ENTRY_total 3.0\n", False, "no bookie_SERVER_STATUS"),
    ):
        server, port = _metrics_server(body)
        try:
            result = bookie_health(port)
        finally:
            server.shutdown()
            server.server_close()
        assert (result.returncode == 0) is healthy, result.stderr
        assert reason in result.stderr
    down = bookie_health(port)  # nothing listens there any more
    assert down.returncode == 1
    assert "bookie not healthy" in down.stderr
