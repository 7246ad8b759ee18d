"""The event-log schema (DESIGN §6), read with an explicit Spark schema."""

from __future__ import annotations

from pyspark.sql.types import DoubleType, IntegerType, LongType, StringType, StructField, StructType

#: the major version this reader understands; events without "v" are version 1
SCHEMA_VERSION = 1
SUMMARY_SCHEMA = "magnetar.postmortem/v1"

EVENT_SCHEMA = StructType(
    [
        StructField("v", IntegerType()),
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
    ]
)

EVENTS = ("send", "send_ok", "send_err", "receive", "ack", "connect", "disconnect", "switch_cluster")
