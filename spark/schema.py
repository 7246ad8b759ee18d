"""The event-log schema (architecture §6), read with an explicit Spark schema, and the report's version.

The event names and the schema's version are the run directory's contract
(``magnetar.common.run_directory``), shared with the workload that writes the log."""

from __future__ import annotations

from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

#: the version of summary.json; its keys only grow within a major version
SUMMARY_SCHEMA = "magnetar.postmortem/v1"

#: a line without these is not an event
REQUIRED = ("ts", "client", "event")
#: Spark puts a line that does not fit the schema here (PERMISSIVE mode)
CORRUPT = "_corrupt_record"

EVENT_FIELDS = StructType(
    [
        # a string, so that "v": 2.1 or "v": "2" are still read and judged by their major version
        StructField("v", StringType()),
        StructField("ts", LongType()),
        StructField("run", StringType()),
        StructField("client", StringType()),
        StructField("role", StringType()),
        StructField("cluster", StringType()),
        StructField("topic", StringType()),
        StructField("subscription", StringType()),
        StructField("event", StringType()),
        StructField("uid", StringType()),
        StructField("key", StringType()),
        StructField("msg_id", StringType()),
        StructField("latency_ms", DoubleType()),
        StructField("error", StringType()),
        # version 2: the subscription's type, the payload's digest, the client's redelivery count
        StructField("sub_type", StringType()),
        StructField("digest", StringType()),
        StructField("redelivery", LongType()),
    ]
)
EVENT_SCHEMA = StructType([*EVENT_FIELDS.fields, StructField(CORRUPT, StringType())])

#: the columns the metrics and checkers use; the rest (run, error, v) are not kept in memory
KEPT = (
    "ts",
    "client",
    "role",
    "cluster",
    "topic",
    "subscription",
    "event",
    "uid",
    "key",
    "latency_ms",
    "msg_id",
    "sub_type",
    "digest",
    "redelivery",
)
#: derived at ingest: the partition a message was stored in (the third field of ``msg_id``; -1 for
#: a non-partitioned topic and for events without a message id)
PARTITION = "partition"
