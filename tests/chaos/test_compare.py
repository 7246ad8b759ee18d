"""``magnetar chaos compare``: its arguments, its plan (what runs where, what Pulsar's processes
cannot take) and its table, without clusters; then one cheap experiment for real on a local
Magnetar cluster and on Apache Pulsar's own processes."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from magnetar.chaos import compare
from magnetar.chaos.cli import EXPERIMENTS, chaos
from magnetar.local.supervisor import Supervisor


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(chaos, ["compare", *args])
    return result.exit_code, result.output


def test_help_has_examples() -> None:
    status, output = invoke("--help")
    assert status == 0
    assert "magnetar chaos compare bundle-unload --against pulsar" in output


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("bundle-unload",), "Missing option '--against'"),
        (("bundle-unload", "--against", "kafka"), "'kafka' is not 'pulsar'"),
        (("--against", "pulsar"), "Missing argument 'EXPERIMENT...'"),
        (("no-such-fault", "--against", "pulsar"), "no experiment 'no-such-fault': neither a file nor"),
        (("bundle-unload", "bundle-unload", "--against", "pulsar"), "experiment 'bundle-unload' named twice"),
    ],
)
def test_bad_arguments_are_refused_before_any_cluster_starts(
    args: tuple[str, ...], expected: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    status, output = invoke(*args)
    assert status != 0
    assert expected in output
    assert not (tmp_path / "runs").exists(), "nothing was made for a comparison that did not start"


def test_an_invalid_experiment_file_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    broken = tmp_path / "broken.yaml"
    broken.write_text("title: no method\n")
    status, output = invoke(str(broken), "--against", "pulsar")
    assert status == 1
    assert str(broken) in output


def test_a_comparison_id_is_not_reused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs" / "taken").mkdir(parents=True)
    (tmp_path / "runs" / "taken" / "compare.json").write_text("{}")
    status, output = invoke("bundle-unload", "--against", "pulsar", "--compare-id", "taken")
    assert status == 1
    assert "already holds a comparison" in output


def test_the_plan_gives_each_experiment_its_topology_and_pulsar_its_limits() -> None:
    names = ("bundle-unload", "bookie-loss", "metadata-store-outage", "region-outage",
             "partition-regions", "replicated-subscription-failover")  # fmt: skip
    planned = {p.name: p for p in compare.plan(names, EXPERIMENTS)}
    assert planned["bundle-unload"].topology == compare.Topology(("jp-east",), 2, 2, (2, 2, 2))
    assert planned["bundle-unload"].pulsar_unsupported == ""
    assert planned["metadata-store-outage"].pulsar_unsupported == ""
    # a bookie lost out of two would leave a 2/2/2 ledger nowhere to go
    assert planned["bookie-loss"].topology.bookies == 3
    assert planned["bookie-loss"].pulsar_unsupported == ""
    assert planned["region-outage"].pulsar_unsupported.startswith("region_outage: needs two regions")
    assert "link proxies" in planned["partition-regions"].pulsar_unsupported
    assert len(planned["replicated-subscription-failover"].topology.regions) == 2
    assert planned["replicated-subscription-failover"].pulsar_unsupported


def summary(lost: int, duplicates: int, window_ms: float, p99: list[tuple[str, float]]) -> dict[str, object]:
    """A post-mortem summary.json with just what the table reads."""
    return {
        "headline": {
            "checker_lost_write": lost,
            "checker_duplicate": duplicates,
            "checker_poll_skip": 2,
            "checker_nonmonotonic_poll": 1,
            "window_max_ms": window_ms,
        },
        "latency": [
            {"fault": "unload-bundle", "phase": phase, "measure": measure, "p99_ms": value}
            for phase, value in p99
            for measure in ("end_to_end", "publish")
        ],
    }


def test_the_table_shows_both_systems_figures_and_what_did_not_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    comparison = compare.new_comparison("pulsar", "table")
    for system, figures in (
        ("magnetar", summary(0, 0, 412.0, [("before", 9.0), ("during", 380.5), ("after", 11.0)])),
        ("pulsar", summary(3, 17, 1875.0, [("during", 2210.0)])),
    ):
        run_dir = tmp_path / "runs" / f"table-bundle-unload-{system}"
        (run_dir / "report").mkdir(parents=True)
        (run_dir / "report" / "summary.json").write_text(json.dumps(figures))
        row = compare.Row("bundle-unload", system, "ran", run_dir=str(run_dir), journal="completed")
        compare.fill(row, run_dir)
        comparison.rows.append(row)
    unanalysed = compare.Row("broker-kill", "magnetar", "ran", run_dir=str(tmp_path / "runs" / "none"))
    compare.fill(unanalysed, tmp_path / "runs" / "none")
    comparison.rows.append(unanalysed)
    comparison.rows.append(compare.Row("region-outage", "pulsar", "not supported", "needs two regions"))
    compare.write(comparison)

    console = Console(record=True, width=220)
    console.print(compare.table(comparison))
    text = console.export_text()
    lines = {line.split("│")[1].strip() + "/" + line.split("│")[2].strip(): line
             for line in text.splitlines() if line.count("│") > 3}  # fmt: skip
    magnetar = lines["bundle-unload/Magnetar"]
    pulsar = next(line for key, line in lines.items() if key.startswith("bundle-unload/Apache Pulsar"))
    assert "412 ms" in magnetar
    assert "380 ms" in magnetar  # the p99 while the fault was on, not before or after
    assert "1,875 ms" in pulsar
    assert "2,210 ms" in pulsar
    assert "17" in pulsar
    assert "not analysed" in lines["broker-kill/Magnetar"]
    assert "not supported: needs two regions" in text

    written = json.loads((tmp_path / "runs" / "table" / "compare.json").read_text())
    assert written["systems"] == ["magnetar", "pulsar"]
    by = {(r["experiment"], r["system"]): r for r in written["rows"]}
    assert by["bundle-unload", "pulsar"]["lost"] == 3
    assert by["bundle-unload", "pulsar"]["p99_lateness_ms"] == 2210.0
    assert by["bundle-unload", "magnetar"]["reorders"] == 1
    assert by["broker-kill", "magnetar"]["status"] == "not analysed"
    assert by["broker-kill", "magnetar"]["lost"] is None


@pytest.mark.slow
@pytest.mark.zookeeper
# two clusters (Pulsar's JVMs take a minute or more to start on a busy 2-core machine), two runs
# and their post-mortem: minutes
@pytest.mark.timeout(900)
@pytest.mark.skipif(
    shutil.which("java") is None or shutil.which("mvn") is None,
    reason="Apache Pulsar's processes need Java 17 and Maven (to fetch its jars once)",
)
def test_bundle_unload_on_magnetar_and_on_apache_pulsar(tmp_path: Path) -> None:
    """The whole command, for real: a local Magnetar cluster and Apache Pulsar's processes each
    take the unload under the workload, and the table has both rows with the post-mortem's
    figures."""
    command = [sys.executable, "-m", "magnetar", "chaos", "compare", "bundle-unload", "--against", "pulsar",
               "--compare-id", "e2e"]  # fmt: skip
    # Pulsar's JVMs live for a minute: the serial collector and the JIT's first tier (C2 compiles
    # more than it saves in a run this short), set as bin/pulsar users set them
    light = {"PULSAR_GC": "-XX:+UseSerialGC", "PULSAR_EXTRA_OPTS": "-XX:TieredStopAtLevel=1"}
    # its own session, so that nothing it started (the post-mortem's Spark) outlives a timeout
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp_path,
        env={"COLUMNS": "220", "PATH": "/usr/bin:/bin", **light}, start_new_session=True,
    )  # fmt: skip
    try:
        output, _ = process.communicate(timeout=850)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        # clusters a failed comparison left running (their processes have sessions of their own)
        for state in (tmp_path / "runs" / "e2e" / "clusters").glob("*/state.json"):
            Supervisor(state.parent).down()
    assert process.returncode == 0, output[-6000:]
    written = json.loads((tmp_path / "runs" / "e2e" / "compare.json").read_text())
    rows = {r["system"]: r for r in written["rows"]}
    assert set(rows) == {"magnetar", "pulsar"}
    for system, row in rows.items():
        assert row["status"] == "ran", (system, row)
        assert row["journal"] == "completed", (system, row)
        assert row["reason"] == "", (system, row)  # no activity failed
        for figure in ("lost", "duplicates", "skips", "reorders", "longest_window_ms", "p99_lateness_ms"):
            assert isinstance(row[figure], int | float), (system, figure, row)
        # an unload under load disrupts the clients for a while on both systems
        assert row["longest_window_ms"] > 0, (system, row)
    assert "Apache Pulsar 4.0.7" in output
