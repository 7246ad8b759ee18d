"""A bookie whose ZooKeeper has gone, frozen or killed, still exits on SIGTERM within its
shutdown_timeout_ms: unregistering and closing the session give up instead of waiting for a store
that never answers, and kazoo's threads do not hold the process."""

from __future__ import annotations

import os
import signal
import time

import pytest

from magnetar.local.zookeeper import ZooKeeperServer
from tests.bookie.conftest import BookieFactory

pytestmark = pytest.mark.zookeeper

#: the shutdown_timeout_ms the test sets: short, as the test is about the bound being kept, not
#: its length (the default is 10 s)
BOUND_S = 5.0
#: for the interpreter's own exit after the bounded shutdown
EXIT_SLACK_S = 2.0


@pytest.mark.parametrize("gone", [signal.SIGKILL, signal.SIGSTOP], ids=["killed", "frozen"])
def test_sigterm_exits_within_the_bound_whatever_zookeeper_does(
    bookie_factory: BookieFactory, own_zookeeper: ZooKeeperServer, gone: signal.Signals
) -> None:
    # A session timeout longer than the bound: kazoo's own stop waits up to it (and more) while
    # ZooKeeper does not answer, so giving up is what keeps the bound.
    bookie = bookie_factory(
        own_zookeeper.url("/bookies"), zk_timeout=30_000, shutdown_timeout_ms=int(BOUND_S * 1000)
    )
    assert own_zookeeper.pid is not None
    os.kill(own_zookeeper.pid, gone)
    time.sleep(1.0)  # kazoo notices: requests made from now on wait for a reconnection

    started = time.monotonic()
    code = bookie.stop(timeout_s=BOUND_S + EXIT_SLACK_S)  # raises (and kills it) past the deadline
    elapsed = time.monotonic() - started
    assert code == 0, bookie.log_path.read_text()[-3000:]
    assert elapsed < BOUND_S + EXIT_SLACK_S
    log = bookie.log_path.read_text()
    assert "shutdown: Registration did not stop within" in log  # it gave up on the store, saying so
    assert f"bookie {bookie.bookie_id} stopped" in log  # and still flushed and closed its storage
