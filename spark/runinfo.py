"""Optional run metadata, ``RUN_DIR/run.json`` (every run of the chaos lab writes it): the run's id,
its clusters, and the subscriptions that were meant to run to the end (so a subscription that
received nothing at all still counts its losses). Without the file the id is the directory's name
and subscriptions are found in the log. The file's model and reader are the run directory's
contract (``magnetar.common.run_directory``); here a bad file is the post-mortem's BadInputError.
"""

from __future__ import annotations

from magnetar.common.run_directory import RunInfo, RunInfoError
from magnetar.common.run_directory import read_run_info as read_contract
from magnetar.spark.errors import BadInputError
from magnetar.spark.location import Location, Where


def read_run_info(run_dir: Where) -> RunInfo:
    try:
        return read_contract(Location.of(run_dir))
    except RunInfoError as exc:
        raise BadInputError(str(exc)) from exc
