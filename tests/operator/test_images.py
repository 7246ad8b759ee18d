"""The image's entrypoint, run as a pod would run it."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.operator.conftest import ROOT

ENTRYPOINT = ROOT / "images" / "entrypoint.sh"


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
