"""The SparkSession: local[*] by default, any master (spark-submit, Kubernetes) when given."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from pyspark.sql import SparkSession

#: for a small log: one shuffle partition, expressions evaluated without whole-stage code
#: generation (compiling each new plan's generated code costs more than it saves on little data),
#: and no adaptive execution: it runs every shuffle and broadcast of a query as a Spark job of its
#: own and plans the rest of the query again after each, a fixed cost per stage that buys nothing
#: when every shuffle has one partition (a golden post-mortem: 81 jobs with it, 38 without)
SMALL_INPUT = {
    "spark.sql.shuffle.partitions": "1",
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.adaptive.enabled": "false",
}
#: the JVMs of a session that analyses only small logs: the JIT's first tier, and the serial
#: collector. A post-mortem of a few thousand events is over in seconds, long before C2's compiler
#: threads (which took as much CPU as the analysis itself) pay off. The first tier alone gets a
#: 48 MB code cache, which a session's generated classes fill within a dozen post-mortems (47.7 MB
#: used at the twelfth, the JIT then evicting and recompiling); 240 MB is what tiered compilation
#: reserves by default, committed only as it is used (55 MB after twelve).
SMALL_INPUT_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:ReservedCodeCacheSize=240m"
#: the JVMs of a session that analyses several small logs whole, each of some size (`magnetar
#: postmortem` of several runs, the bench): the serial collector and both tiers of the JIT. The
#: same plans run again for each log, so C2's code pays for its compiling from the second or third
#: post-mortem on: an
#: 80,000-event log took 15 s (17.5 JVM CPU-s) each time with the first tier alone, 7-8 s (9-11) with
#: C2 from the fourth post-mortem on, both tiers' total CPU even by the fifth. Many short, different
#: queries (the spark tier's tests) run faster on the first tier alone.
MANY_SMALL_INPUTS_JVM = "-XX:+UseSerialGC -XX:ReservedCodeCacheSize=240m"
#: the post-mortems a session is started for from which MANY_SMALL_INPUTS_JVM is its JVMs' setting
MANY = 3
#: ... when their logs are at least this big on average: C2 pays for its compiling only where the
#: tasks have enough events to run its code on. The demo's four logs (3 to 10 MB, 21 MB in all):
#: 62 JVM CPU-s for the session with the first tier alone, 94 with both, in the same wall time;
#: an 80,000-event log (24 MB) analysed again and again: C2 cheaper from the second time on
MANY_RUN_BYTES = 16 * 1024 * 1024
#: the logs (bytes of events/*.jsonl) a session is started for SMALL_INPUT_JVM
SMALL_INPUT_BYTES = 64 * 1024 * 1024


def spark_session(
    master: str | None = "local[*]",
    app: str = "magnetar-postmortem",
    conf: Mapping[str, str] | None = None,
    *,
    small_input: bool = False,
    runs: int = 1,
    run_bytes: int | None = None,
) -> SparkSession:
    """A quiet session: no UI, no progress bars, WARN logging, UTC, few shuffle partitions locally.

    ``master=None`` keeps whatever spark-submit configured; ``conf`` adds to or overrides these
    settings (e.g. an executor's memory on a cluster); ``small_input``: the session will analyse
    small logs only, so its JVMs start with SMALL_INPUT_JVM, or MANY_SMALL_INPUTS_JVM for ``runs``
    (post-mortems it is for) of MANY or more whose logs average ``run_bytes`` (bytes of events a
    run, when known) of at least MANY_RUN_BYTES (no effect on a running session)."""
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
        # a session that runs several post-mortems (tests, --compare) reuses the code compiled for
        # plans it has seen; one post-mortem compiles more classes than the default 100 keep
        .config("spark.sql.codegen.cache.maxEntries", "2000")
        .config("spark.driver.memory", "3g")
        # what the status store keeps of finished queries, jobs and stages, with or without a UI:
        # a long session (the tests', several runs) would otherwise hold a thousand plans' worth
        .config("spark.sql.ui.retainedExecutions", "50")
        .config("spark.ui.retainedJobs", "200")
        .config("spark.ui.retainedStages", "200")
        .config("spark.ui.retainedTasks", "5000")
        # pyspark's call-site capture for errors' DataFrame context: round trips to the JVM (the
        # session, a setting, the origin set and cleared) and a walk of the Python stack for every
        # column function and DataFrame method called, half of a small post-mortem's 20,000 round
        # trips (Spark's errors still name the failing expression)
        .config("spark.python.sql.dataFrameDebugging.enabled", "false")
    )
    if small_input:
        # the driver's, and on a cluster the executors' (in local mode they are the driver)
        jvm = small_input_jvm(runs, run_bytes)
        builder = builder.config("spark.driver.extraJavaOptions", jvm)
        builder = builder.config("spark.executor.extraJavaOptions", jvm)
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


def small_input_jvm(runs: int, run_bytes: int | None = None) -> str:
    """The JVM options of a session for small logs: ``runs`` post-mortems of ``run_bytes`` each
    on average (None: unknown, taken as big enough for C2)."""
    many = runs >= MANY and (run_bytes is None or run_bytes >= MANY_RUN_BYTES)
    return MANY_SMALL_INPUTS_JVM if many else SMALL_INPUT_JVM


@contextmanager
def sized(spark: SparkSession, small: bool) -> Iterator[None]:
    """SMALL_INPUT's settings while a small log is analysed; the session's own ones restored after
    (the session may be the caller's)."""
    if not small:
        yield
        return
    saved = {key: spark.conf.get(key, None) for key in SMALL_INPUT}
    for key, setting in SMALL_INPUT.items():
        spark.conf.set(key, setting)
    try:
        yield
    finally:
        for key, before in saved.items():
            if before is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, before)
