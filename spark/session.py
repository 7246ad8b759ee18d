"""The SparkSession: local[*] by default, any master (spark-submit, Kubernetes) when given."""

from __future__ import annotations

from pyspark.sql import SparkSession


def spark_session(master: str | None = "local[*]", app: str = "magnetar-postmortem") -> SparkSession:
    builder = SparkSession.builder.appName(app)
    if master:
        builder = builder.master(master)
    spark = (
        builder.config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "2g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark
