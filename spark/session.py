"""The SparkSession: local[*] by default, any master (spark-submit, Kubernetes) when given."""

from __future__ import annotations

from pyspark.sql import SparkSession


def spark_session(master: str | None = "local[*]", app: str = "magnetar-postmortem") -> SparkSession:
    """A quiet session: no UI, no progress bars, WARN logging, UTC, few shuffle partitions locally.

    ``master=None`` keeps whatever spark-submit configured."""
    builder = SparkSession.builder.appName(app)
    if master:
        builder = builder.master(master)
    local = master is None or master.startswith("local")
    builder = (
        builder.config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.log.level", "WARN")
        .config("spark.sql.session.timeZone", "UTC")
        # a post-mortem's tables are small after the first aggregation; 200 partitions is pure overhead
        .config("spark.sql.shuffle.partitions", "4" if local else "64")
        .config("spark.sql.adaptive.enabled", "true")
        .config("spark.driver.memory", "3g")
    )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark
