"""The Grafana dashboards the chart ships name only metrics that really are exported: every
PromQL expression's metric names, checked against the /metrics of real processes after traffic
(a ZooKeeper, a bookie and a broker of ``magnetar local``, written to and read from with the
official client) and of the real operator after it reconciled a cluster."""

from __future__ import annotations

import json
import re
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pulsar
import pytest
from kubernetes import client
from prometheus_client.parser import text_string_to_metric_families

from magnetar.local.spec import ClusterSpec, LedgerSpec, RegionSpec
from magnetar.local.supervisor import ClusterState, Supervisor
from magnetar.operator.metrics import OperatorMetrics
from tests.operator.conftest import condition, get_cr, wait_for
from tests.operator.test_chart import CHART

DASHBOARDS = CHART / "dashboards"
#: the dashboards of the cluster's processes, and the operator's own
CLUSTER_DASHBOARDS = ("broker.json", "bookie.json", "replication.json")
OPERATOR_DASHBOARD = "operator.json"

# -- PromQL: the metric names an expression reads ------------------------------------------------
_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
#: label matchers, range and subquery windows, and grouping clauses hold no metric names
_BRACES = re.compile(r"\{[^}]*\}|\[[^\]]*\]")
_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_IDENTIFIER = re.compile(r"(?<![\w:.])([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?")
_KEYWORDS = {"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring",
             "group_left", "group_right", "inf", "nan", "atan2"}  # fmt: skip
_DURATION = re.compile(r"^\d")


def metric_names(expr: str) -> set[str]:
    """The metric names ``expr`` selects: identifiers that are not functions, aggregations,
    keywords, labels or numbers."""
    text = _STRINGS.sub('""', expr)
    text = _BRACES.sub(" ", text)
    text = _GROUPING.sub(" ", text)
    names = set()
    for match in _IDENTIFIER.finditer(text):
        name, call = match.group(1), match.group(2)
        if call or name.lower() in _KEYWORDS or _DURATION.match(name):
            continue
        names.add(name)
    return names


def test_metric_names_are_found_and_nothing_else() -> None:
    assert metric_names('sum by (pod) (rate(x_total{a="b"}[1m]))') == {"x_total"}
    assert metric_names("histogram_quantile(0.99, sum by (le, pod) (rate(h_bucket[5m])))") == {"h_bucket"}
    assert metric_names('count by (kind) (c{type="Ready"} == 0)') == {"c"}
    assert metric_names("a / on (pod) group_left (x) b offset 5m") == {"a", "b"}
    assert metric_names("sum(rate(a[1m])) by (pod) / max without (le) (b:recorded)") == {"a", "b:recorded"}
    assert metric_names('topk(5, m{name=~"by|sum"}) and bool 1e3') == {"m"}


def expressions(path: Path) -> list[str]:
    """Every PromQL expression of a dashboard (its panels' targets, nested rows' too)."""
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("expr"), str):
                found.append(node["expr"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(json.loads(path.read_text()))
    return found


def exported(pages: list[str]) -> set[str]:
    """The names of the samples of /metrics pages: a counter's ``_total``, a histogram's
    ``_bucket``, ``_sum`` and ``_count`` (so each names the histogram it belongs to), a gauge's own.
    Families with no sample (declared, never set) export nothing a query could read."""
    return {
        s.name for page in pages for family in text_string_to_metric_families(page) for s in family.samples
    }


def unexported(dashboards: tuple[str, ...], names: set[str]) -> dict[str, set[str]]:
    """Per dashboard, the metric names its queries read that no page exported."""
    missing: dict[str, set[str]] = {}
    for dashboard in dashboards:
        for expr in expressions(DASHBOARDS / dashboard):
            for name in metric_names(expr) - names:
                missing.setdefault(dashboard, set()).add(name)
    return missing


def scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:
        return str(response.read().decode())


def test_every_dashboard_has_queries_and_the_check_catches_a_made_up_metric(tmp_path: Path) -> None:
    assert sorted(p.name for p in DASHBOARDS.glob("*.json")) == sorted(
        (*CLUSTER_DASHBOARDS, OPERATOR_DASHBOARD)
    )
    for path in DASHBOARDS.glob("*.json"):
        assert expressions(path), path.name
        assert all(metric_names(e) for e in expressions(path)), path.name
    names = {n for p in DASHBOARDS.glob("*.json") for e in expressions(p) for n in metric_names(e)}
    assert unexported((*CLUSTER_DASHBOARDS, OPERATOR_DASHBOARD), names) == {}
    assert unexported(("broker.json",), names - {"pulsar_rate_in"}) == {"broker.json": {"pulsar_rate_in"}}
    bucket = "pulsar_broker_publish_latency_seconds_bucket"  # a histogram's buckets, not exported
    assert unexported(("broker.json",), names - {bucket}) == {"broker.json": {bucket}}


# -- the cluster's processes -----------------------------------------------------------------------
def _bookie_metrics_url(log: str) -> str:
    line = next(line for line in Path(log).read_text().splitlines() if line.startswith("bookie metrics "))
    return line.split()[-1]


@pytest.fixture
def local_cluster(tmp_path: Path) -> Iterator[ClusterState]:
    supervisor = Supervisor(tmp_path / "cluster")
    spec = ClusterSpec(
        name="dashboards",
        regions=[RegionSpec(name="r1", bookies=1, brokers=1,
                            ledger=LedgerSpec(ensemble_size=1, write_quorum=1, ack_quorum=1))],
    )  # fmt: skip
    state = supervisor.up(spec)
    try:
        yield state
    finally:
        supervisor.down()


@pytest.mark.zookeeper
@pytest.mark.slow
def test_the_broker_bookie_and_replication_dashboards_name_only_exported_metrics(
    local_cluster: ClusterState,
) -> None:
    broker = local_cluster.find("broker")[0].endpoints
    bookie = local_cluster.find("bookie")[0]
    c = pulsar.Client(broker["service_url"], operation_timeout_seconds=30,
                      logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn))  # fmt: skip
    try:
        topic = "persistent://public/default/dashboards"
        consumer = c.subscribe(topic, "reader")
        c.subscribe(topic, "behind")  # never reads: a backlog
        producer = c.create_producer(topic)
        for i in range(20):
            producer.send(f"m-{i}".encode())
        for _ in range(20):
            consumer.acknowledge(consumer.receive(timeout_millis=10_000))
        # the topic is loaded while its producer and consumers are open: scraped now
        pages = [scrape(f"{broker['web_service_url']}/metrics"), scrape(_bookie_metrics_url(bookie.log))]
    finally:
        c.close()
    names = exported(pages)
    assert "pulsar_rate_in" in names  # the broker's page, with the topic on it
    assert "bookkeeper_server_ADD_ENTRY_total" in names  # the bookie's, which stored the entries
    assert unexported(CLUSTER_DASHBOARDS, names) == {}


# -- the operator ------------------------------------------------------------------------------------
def test_the_operator_dashboard_names_only_exported_metrics(
    api: client.ApiClient, k8s_namespace: str, start_operator: Callable[..., Any]
) -> None:
    metrics = OperatorMetrics()
    server = metrics.serve(0, host="127.0.0.1")
    url = f"http://127.0.0.1:{server.server_port}/metrics"
    try:
        start_operator(metrics=metrics)
        tiny = {"replicas": 1, "ensembleSize": 1, "writeQuorum": 1, "ackQuorum": 1}
        spec = {"bookies": tiny, "brokers": {"replicas": 1}}
        body = {
            "apiVersion": "magnetar.dev/v1alpha1",
            "kind": "MagnetarCluster",
            "metadata": {"name": "seen"},
        }
        body["spec"] = spec
        client.CustomObjectsApi(api).create_namespaced_custom_object(
            "magnetar.dev", "v1alpha1", k8s_namespace, "magnetarclusters", body
        )
        wait_for("seen Ready", lambda: ready(api, k8s_namespace, "seen"))
        shown = (
            f'magnetar_operator_condition{{kind="MagnetarCluster",name="seen",namespace="{k8s_namespace}",'
            'reason="Converged",type="Ready"} 1.0'
        )
        page: str = wait_for("the Ready condition on /metrics", lambda: _page_showing(url, shown))
    finally:
        server.shutdown()
        server.server_close()
    done = [
        s
        for f in text_string_to_metric_families(page)
        for s in f.samples
        if s.name == "magnetar_operator_reconciles_total"
        and s.labels == {"kind": "MagnetarCluster", "outcome": "done"}
    ]
    assert done[0].value >= 1
    assert unexported((OPERATOR_DASHBOARD,), exported([page])) == {}


def ready(api: client.ApiClient, namespace: str, name: str) -> bool:
    return condition(get_cr(api, "magnetarclusters", namespace, name)).get("status") == "True"


def _page_showing(url: str, line: str) -> str | None:
    page = scrape(url)
    return page if line in page.splitlines() else None
