"""run.json as ``magnetar chaos run`` assembles it from the journal: the run's id, and the clusters
and subscriptions of the workloads that started (what each start_workload returned)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from magnetar.chaos import run as chaos_run
from magnetar.common.run_directory import WORKLOAD_ACTIONS_MODULE, ExpectedSubscription, RunInfo

TOPIC = "persistent://geo/outage/orders"


def started(func: str, output: Any, status: str = "succeeded", module: str = WORKLOAD_ACTIONS_MODULE) -> Any:
    activity = {"type": "action", "name": "n", "provider": {"type": "python", "module": module, "func": func}}
    return {"activity": activity, "status": status, "output": output}


def workload(subscription: str | None, clusters: list[str], topic: str = TOPIC) -> dict[str, Any]:
    return {
        "pid": 1,
        "topic": topic,
        "subscription": subscription,
        "clusters": clusters,
    }


def test_the_workloads_clusters_and_subscriptions_in_start_order(tmp_path: Path) -> None:
    journal = {
        "run": [
            started("replicated_namespace", {"clusters": ["x"]}, module="magnetar.chaos.geo.actions"),
            started("start_workload", workload("orders-e", ["jp-east", "jp-west"])),
            started("start_workload", workload("orders-w", ["jp-west", "jp-east"])),
            started(
                "start_workload", workload(None, ["jp-west", "jp-east"], "persistent://a/b/producers-only")
            ),
            started("start_workload", workload("orders-e", ["jp-east", "jp-west"])),  # the same, again
            started("stop_workloads", {"w": {"pid": 1}}),
        ],
        "rollbacks": [started("stop_workload", {"already_stopped": True})],
    }
    assert chaos_run.run_info(tmp_path / "r-1", journal) == RunInfo(
        id="r-1",
        clusters=["jp-east", "jp-west"],
        subscriptions=[
            ExpectedSubscription(topic=TOPIC, subscription="orders-e"),
            ExpectedSubscription(topic=TOPIC, subscription="orders-w"),
        ],
    )


def test_a_workload_that_did_not_start_is_not_listed(tmp_path: Path) -> None:
    journal = {
        "run": [
            started("start_workload", None, status="failed"),
            started("start_workload", workload("s", ["local"]), module="someone.elses.actions"),
        ]
    }
    assert chaos_run.run_info(tmp_path / "r", journal) == RunInfo(id="r")


def test_a_run_without_a_workload_has_its_id_only(tmp_path: Path) -> None:
    assert chaos_run.run_info(tmp_path / "bookie-restart-1", {"run": [], "rollbacks": None}) == RunInfo(
        id="bookie-restart-1"
    )


def test_the_contract_names_the_workloads_actions_module() -> None:
    from magnetar.chaos.workload import actions

    assert actions.__name__ == WORKLOAD_ACTIONS_MODULE
    assert actions.start_workload.__module__ == actions.stop_workload.__module__ == WORKLOAD_ACTIONS_MODULE
