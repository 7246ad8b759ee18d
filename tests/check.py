"""What `make check` runs: the unit tests (one module, in-memory or in-process parts, well under a
second each) and the fastest end-to-end test of each component, marked ``check``.

`make check` is the inner loop (lint, types, then ``pytest -m check``); `make test` still runs
everything, and CI runs only that. A name here that matches no test fails the collection, so a
renamed test cannot quietly leave the loop.
"""

from __future__ import annotations

import pytest

#: node ids, or their beginnings (a module, a folder), of the tests `make check` runs
CHECK = (
    # unit tests
    "tests/bookie/test_journal.py",
    "tests/bookie/test_server.py",
    "tests/bookie/test_integrity.py",
    "tests/bookie/test_services.py",
    "tests/bookie/test_bookie_fuzz.py",
    "tests/bookie/client/test_placement.py",
    "tests/bookie/client/test_ledger_metadata.py",
    "tests/broker/test_",
    "tests/broker/managed_ledger/",
    "tests/broker/non_persistent/",
    "tests/broker/readonly/test_tailing.py",
    "tests/broker/cluster/test_topic_load.py",
    "tests/broker/cluster/test_ownership.py",
    "tests/broker/cluster/test_rpc_tls.py",
    "tests/common/",
    "tests/test_disk.py",
    "tests/chaos/test_link_proxy.py",
    "tests/chaos/test_foreign_processes.py",
    "tests/kube/test_volumes.py",
    "tests/kube/test_image_store.py",
    # the fastest end-to-end test of each component
    "tests/bookie/test_process.py::test_sigterm_shuts_down_cleanly_and_restart_serves_the_data",
    "tests/broker/e2e/test_produce_consume.py::test_reader_from_earliest_and_from_a_message_id",
    "tests/chaos/test_chaos_run.py::test_run_gathers_journal_logs_and_summary",
    "tests/spark/test_ordering.py::test_a_non_partitioned_topic_has_no_partition_scope",
    "tests/spark/test_session.py",
)


@pytest.hookimpl(tryfirst=True)  # on the whole collection, before anything is deselected
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    unmatched = set(CHECK)
    for item in items:
        for prefix in CHECK:
            if item.nodeid.startswith(prefix):
                item.add_marker(pytest.mark.check)
                unmatched.discard(prefix)
    # Only a whole collection can tell (a run of one folder collects part of the list).
    if unmatched and config.args_source != pytest.Config.ArgsSource.ARGS:
        raise pytest.UsageError(f"tests/check.py names tests that do not exist: {sorted(unmatched)}")
