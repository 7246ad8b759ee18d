"""Optional run metadata, ``RUN_DIR/run.json``: the run's id, its clusters, and the subscriptions
that were meant to run to the end (so a subscription that received nothing at all still counts
its losses). Without the file the id is the directory's name and subscriptions are found in the log.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, ValidationError

from magnetar.spark.errors import BadInputError
from magnetar.spark.location import Location, Where


class ExpectedSubscription(BaseModel):
    model_config = ConfigDict(extra="forbid")
    topic: str
    subscription: str


class RunInfo(BaseModel):
    model_config = ConfigDict(extra="allow")
    id: str
    clusters: list[str] = []
    subscriptions: list[ExpectedSubscription] = []


def read_run_info(run_dir: Where) -> RunInfo:
    run_dir = Location.of(run_dir)
    path = run_dir / "run.json"
    if not path.exists():
        return RunInfo(id=run_dir.name)
    try:
        return RunInfo.model_validate_json(path.read_text())
    except (OSError, UnicodeDecodeError, ValidationError) as exc:
        raise BadInputError(f"{path}: not valid run metadata ({exc})") from exc
