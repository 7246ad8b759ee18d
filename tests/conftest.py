"""Fixtures every suite may use: a real ZooKeeper server (one per test session), store URLs,
and one Spark session (local[2]) for every post-mortem, so its start-up is paid once.

``zk_url`` gives each test its own chroot on the shared server, so tests never see each other's
nodes; ``store_url`` runs a test against every backend (memory, sqlite file, ZooKeeper).
"""

from __future__ import annotations

import itertools
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from magnetar.local.zookeeper import ZooKeeperServer
from tests.parts import outside_priority

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytest_plugins = ("tests.cpu", "tests.timing", "tests.scheduling", "tests.check", "tests.disk")

_chroots = itertools.count(1)


@pytest.fixture(scope="session")
def zookeeper_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    """A real ZooKeeper (Debian's package) on a free loopback port for the whole session."""
    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def own_zookeeper(tmp_path: Path) -> Iterator[ZooKeeperServer]:
    """A ZooKeeper of the test's own, for a test that freezes or kills it (the session's one would
    take other tests' clients down with it); thawed before it is stopped."""
    server = ZooKeeperServer(tmp_path / "zookeeper")
    server.start()
    yield server
    if server.pid is not None:
        os.kill(server.pid, signal.SIGCONT)
    server.stop()


@pytest.fixture
def zk_url(zookeeper_server: ZooKeeperServer, request: pytest.FixtureRequest) -> str:
    """``zk://127.0.0.1:PORT/t<n>-<test>``: a fresh chroot on the session's ZooKeeper."""
    name = "".join(c if c.isalnum() else "-" for c in request.node.name)[:60]
    return zookeeper_server.url(f"/t{next(_chroots)}-{name}")


@pytest.fixture
def memory_url(request: pytest.FixtureRequest) -> str:
    """``memory://<n>``: a fresh in-process tree shared by every store opened on it."""
    return f"memory://test-{next(_chroots)}"


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite://{tmp_path / 'metadata.db'}"


@pytest.fixture(params=["memory", "sqlite", "zookeeper"])
def store_url(request: pytest.FixtureRequest) -> str:
    """The URL of a fresh store, once per backend."""
    fixture = {"memory": "memory_url", "sqlite": "sqlite_url", "zookeeper": "zk_url"}[request.param]
    if request.param == "zookeeper":
        request.applymarker(pytest.mark.zookeeper)
    return str(request.getfixturevalue(fixture))


@pytest.fixture(scope="session")
def spark(request: pytest.FixtureRequest) -> Iterator[SparkSession]:
    """Spark in local mode, shared by the post-mortem tests and the chaos runs they analyse."""
    from magnetar.spark.session import spark_session  # imported only by the suites that use it

    # the tests' logs are small: a driver JVM for them, started for as many post-mortems as this
    # run's tests will ask of it
    with outside_priority():  # a post-mortem judges no clock (tests/parts.py)
        session = spark_session("local[2]", small_input=True, runs=_post_mortems(request.session))
    yield session
    session.stop()


SPARK_TESTS = Path(__file__).resolve().parent / "spark"


def _post_mortems(session: pytest.Session) -> int:
    """The whole-run post-mortems this run's tests ask of its Spark session, for its JIT: the
    tests of Spark's own tier are many short, different plans (which C2 slows down, see
    docs/development.md); without them (the exclusive part: eight post-mortems of one experiment),
    each test that uses the session is one post-mortem of a run."""
    users = [item for item in session.items if "spark" in getattr(item, "fixturenames", ())]
    if any(SPARK_TESTS in Path(str(item.path)).parents for item in users):
        return 1
    return len(users)
