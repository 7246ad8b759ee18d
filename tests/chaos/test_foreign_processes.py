"""Processes that are not Magnetar's (Apache Pulsar's brokers in side-by-side runs) recorded in a
cluster's state.json: the chaos lab kills them for real, starts them again with their own command
line, waits for their own ready line, and ``down`` stops them."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from magnetar.chaos.process import actions, probes
from magnetar.local.supervisor import ClusterState, ProcessRecord, Supervisor, alive

# a stand-in for a JVM broker: slow to be ready, then says so in its own words
BROKER = """
import sys, time
time.sleep(0.3)
print("12:00:00.000 INFO  PulsarService - messaging service is ready", flush=True)
time.sleep(3600)
"""


def record_foreign_broker(directory: Path) -> ProcessRecord:
    directory.mkdir(parents=True)
    script = directory / "broker.py"
    script.write_text(BROKER)
    command = [sys.executable, str(script), "--broker-conf", "broker.conf"]
    log = directory / "broker.log"
    with open(log, "ab") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    record = ProcessRecord(
        name="other-broker-0",
        role="broker",
        region="other",
        pid=process.pid,
        log=str(log),
        endpoints={"service_url": "pulsar://127.0.0.1:1"},
        command=command,
        ready_text="messaging service is ready",
    )
    ClusterState(name="other", directory=str(directory), processes=[record]).save()
    return record


def test_a_foreign_broker_is_killed_restarted_with_its_command_and_stopped(tmp_path: Path) -> None:
    directory = tmp_path / "other"
    first = record_foreign_broker(directory)
    assert probes.cluster_healthy(cluster_dir=str(directory))

    killed = actions.kill_broker(index=0, cluster_dir=str(directory))
    assert killed["pid"] == first.pid
    assert not alive(first.pid)
    assert probes.processes_down(cluster_dir=str(directory)) == ["other-broker-0"]

    started = actions.start_broker(index=0, cluster_dir=str(directory), timeout_s=30)
    assert started["pid"] != first.pid
    assert alive(started["pid"])
    restarted = ClusterState.load(directory).processes[0]
    # its own endpoints survive the restart (a foreign ready line is not parsed for them)
    assert restarted.endpoints == {"service_url": "pulsar://127.0.0.1:1"}
    assert (
        Path(f"/proc/{started['pid']}/cmdline").read_bytes().split(b"\0")[1]
        == str(directory / "broker.py").encode()
    )

    assert Supervisor(directory).down() == ["other-broker-0"]
    deadline = time.monotonic() + 10
    while alive(started["pid"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(started["pid"])


def test_a_reused_pid_is_not_taken_for_the_foreign_process(tmp_path: Path) -> None:
    directory = tmp_path / "other"
    record = record_foreign_broker(directory)
    # the recorded command no longer matches what runs under that pid: down leaves it alone
    state = ClusterState.load(directory)
    state.processes[0].command = [sys.executable, "something-else.py"]
    state.save()
    try:
        assert Supervisor(directory).down() == []
        assert alive(record.pid)
    finally:
        subprocess.run(["kill", "-9", str(record.pid)], check=False)
