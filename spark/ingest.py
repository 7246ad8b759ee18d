"""Reading the event log: every line parsed once with an explicit schema, bad lines located.

A line is one of: an event; blank (ignored: writers end files with a newline); or bad, with the
reason, its file and its line number. Bad lines are counted and listed, never dropped in silence.
An event whose major schema version (``v``, absent means 1) is not ours stops the post-mortem with
an error naming the file, since guessing at a newer schema would give wrong numbers.

Line numbers are exact without reading files twice: Spark reads a file split (block) in order
within a partition, so a line is the lines of the earlier blocks of its file, plus its position in
its own block (from ``monotonically_increasing_id``, contiguous within a partition).

A big log is first read as clean (every line an event), which does less work a line: Spark's JSON
reader parses each line straight into the columns kept, with no copy of its text, no line numbers
and nothing staged but those columns. Its answer is kept only when it proves the log clean:
every line starts with ``{`` (so none is a JSON array, which that reader would read as several
rows), it read as many rows as there are lines (it skips blank ones) and every row is an event.
Anything else, and the log is read again line by line as above, which locates what is wrong. The
same parser reads a line either way, so a clean log gives the same events.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Observation, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from magnetar.common.run_directory import EVENTS, READABLE_VERSIONS, Layout
from magnetar.spark.errors import BadInputError
from magnetar.spark.location import Location, Where
from magnetar.spark.schema import CORRUPT, EVENT_SCHEMA, KEPT, PARTITION, REQUIRED

#: the longest excerpt of a bad line kept for the report
EXCERPT = 160
OK, BLANK, BAD, NEWER = 0, 1, 2, 3
#: the majors this reader knows, for the message refusing another
KNOWN = " and ".join(str(v) for v in READABLE_VERSIONS)
#: what the refusal of a newer major names: its first line's file, and why
NEWER_SAYS = ("file", "reason")
#: a log of at least this many bytes is first read as clean (a smaller one is read line by line at
#: once: proving it clean takes more Spark jobs, a fixed cost that only a big log repays)
CLEAN_FIRST_BYTES = 64 * 1024 * 1024
#: the bad lines' table: file, line (1-based), reason, text
BAD_LINES = StructType(
    [
        StructField("file", StringType()),
        StructField("line", LongType()),
        StructField("reason", StringType()),
        StructField("text", StringType()),
    ]
)


@dataclass(frozen=True)
class EventLog:
    events: DataFrame  # the valid events, columns KEPT and PARTITION
    bad_lines: DataFrame  # file, line, reason, text
    lines: int
    bad: int
    files: int
    staging: Location
    valid: int  # how many events
    last_ts: int  # the latest event's ts (0 without events)
    clean: bool  # read as clean (see above), not line by line

    def release(self) -> None:
        self.staging.remove()


def event_files(run_dir: Where) -> list[Location]:
    run_dir = Location.of(run_dir)
    if not run_dir.is_dir():
        raise BadInputError(f"{run_dir}: no such run directory")
    files = (run_dir / Layout.EVENTS).files(suffix=Layout.EVENT_LOG_SUFFIX)
    if not files:
        raise BadInputError(f"{run_dir / Layout.EVENTS}: no *{Layout.EVENT_LOG_SUFFIX} event logs")
    return files


def read_events(
    spark: SparkSession, run_dir: Where, staging: Location, *, clean_first: int | None = None
) -> EventLog:
    """The run's lines, parsed into ``staging`` (a Parquet directory, removed by ``release``);
    a log of ``clean_first`` bytes or more (default CLEAN_FIRST_BYTES) is first read as clean."""
    files = event_files(run_dir)
    threshold = CLEAN_FIRST_BYTES if clean_first is None else clean_first
    if sum(f.size() for f in files) >= threshold:
        clean = _read_clean(spark, files, staging)
        if clean is not None:
            return clean
    raw = spark.read.text([f.spark for f in files]).select(
        "value",
        F.col("_metadata.file_name").alias("file"),
        F.col("_metadata.file_block_start").alias("block"),
        F.monotonically_increasing_id().alias("rid"),
    )
    parsed = raw.withColumn("e", F.from_json("value", EVENT_SCHEMA, {"mode": "PERMISSIVE"}))
    status, reason = _judge(lambda name: F.col("e")[name], F.trim(F.col("value")) == "")
    rows = parsed.select(
        "file",
        "block",
        "rid",
        status.alias("status"),
        F.when(status >= BAD, reason).alias("reason"),
        F.when(status >= BAD, F.substring("value", 1, EXCERPT)).alias("text"),
        *[F.col(f"e.{name}").alias(name) for name in KEPT],
        _partition(F.col("e.msg_id")),
    )
    # everything later steps need to know about the whole log, observed while it is parsed into
    # Parquet (the write's own pass, no query of its own); every later step reads only the
    # columns it needs from there
    seen = Observation("log")
    rows.observe(
        seen,
        F.count("*").alias("lines"),
        F.sum((F.col("status") >= BAD).cast("long")).alias("bad"),
        # the first line of a newer major, by its columns (an observed struct comes back unconverted)
        *[
            F.min_by(name, F.when(F.col("status") == NEWER, F.col("rid"))).alias(f"newer_{name}")
            for name in NEWER_SAYS
        ],
        F.sum((F.col("status") == OK).cast("long")).alias("valid"),
        F.max(F.when(F.col("status") == OK, F.col("ts"))).alias("last_ts"),
    ).write.mode("overwrite").parquet(staging.spark)
    counts = seen.get
    rows = spark.read.schema(rows.schema).parquet(staging.spark)
    if counts["newer_file"] is not None:
        staging.remove()
        raise BadInputError(f"{counts['newer_file']}: {counts['newer_reason']}")
    events = rows.where(F.col("status") == OK).select(*KEPT, PARTITION)
    bad = counts["bad"] or 0
    # without bad lines, limit(0) makes the table an empty relation: no job scans the log for it
    bad_lines = _locate(rows) if bad else _locate(rows).limit(0)
    valid, last_ts = counts["valid"] or 0, counts["last_ts"] or 0
    return EventLog(events, bad_lines, counts["lines"], bad, len(files), staging, valid, last_ts, False)


def _read_clean(spark: SparkSession, files: list[Location], staging: Location) -> EventLog | None:
    """The log read by Spark's JSON reader into ``staging``, if that proves it clean (see above);
    None, with nothing staged, if not."""
    paths = [f.spark for f in files]
    # the lines and those that do not start an object, from a scan of the text that parses nothing
    text = spark.read.text(paths).agg(
        F.count("*").alias("lines"), F.sum((~F.col("value").startswith("{")).cast("long")).alias("other")
    )
    lines, other = text.first() or (0, 0)
    if not lines or other:
        return None
    parsed = spark.read.schema(EVENT_SCHEMA).json(paths, mode="PERMISSIVE", columnNameOfCorruptRecord=CORRUPT)
    status, _ = _judge(F.col, F.lit(False))
    seen = Observation("clean log")
    kept = parsed.observe(
        seen,
        F.count("*").alias("rows"),
        F.sum((status != OK).cast("long")).alias("not_events"),
        F.max("ts").alias("last_ts"),
    ).select(*KEPT, _partition(F.col("msg_id")))
    kept.write.mode("overwrite").parquet(staging.spark)
    counts = seen.get
    if counts["rows"] != lines or counts["not_events"]:
        staging.remove()
        return None
    events = spark.read.schema(kept.schema).parquet(staging.spark)
    bad_lines = spark.createDataFrame([], BAD_LINES)
    return EventLog(events, bad_lines, lines, 0, len(files), staging, lines, counts["last_ts"] or 0, True)


def _partition(msg_id: Column) -> Column:
    return F.coalesce(F.split(msg_id, ":").getItem(2).cast("int"), F.lit(-1)).alias(PARTITION)


def _judge(e: Callable[[str], Column], blank: Column) -> tuple[Column, Column]:
    """Each line's status (OK, BLANK, BAD, NEWER) and, for bad ones, why: ``e`` gives a field of
    the parsed line, ``blank`` says the line is blank."""
    readable = [str(v) for v in READABLE_VERSIONS]
    major = F.split(F.trim(e("v")), r"\.").getItem(0)
    # a plain major ("1", "2") is known without splitting the version (a regular expression a line)
    unknown = e("v").isNotNull() & ~e("v").isin(*readable) & ~major.isin(*readable)
    missing = [F.when(e(name).isNull(), F.lit(name)) for name in REQUIRED]
    not_an_event = e(CORRUPT).isNotNull() & e("ts").isNull() & e("client").isNull() & e("event").isNull()
    status = (
        F.when(blank, BLANK)
        .when(not_an_event, BAD)
        .when(unknown, NEWER)
        .when(e(CORRUPT).isNotNull(), BAD)
        .when(F.greatest(*[e(name).isNull() for name in REQUIRED]), BAD)
        .when(~e("event").isin(*EVENTS), BAD)
        .otherwise(OK)
    )
    reason = (
        F.when(not_an_event, F.lit("not a JSON object of the event schema"))
        .when(
            unknown,
            F.concat(
                F.lit("event schema version "),
                e("v"),
                F.lit(f" is not supported (this reader knows major versions {KNOWN})"),
            ),
        )
        .when(e(CORRUPT).isNotNull(), F.lit("a field has the wrong type"))
        .when(
            F.greatest(*[e(name).isNull() for name in REQUIRED]),
            F.concat_ws(", ", F.lit("missing"), *missing),
        )
        .otherwise(F.concat(F.lit("unknown event "), F.coalesce(e("event"), F.lit("?"))))
    )
    return status, reason


def _locate(rows: DataFrame) -> DataFrame:
    """file, line (1-based), reason and text of every bad line."""
    blocks = rows.groupBy("file", "block").agg(F.min("rid").alias("first_rid"), F.count("*").alias("n"))
    earlier = Window.partitionBy("file").orderBy("block").rowsBetween(Window.unboundedPreceding, -1)
    blocks = blocks.withColumn("before", F.coalesce(F.sum("n").over(earlier), F.lit(0)))
    bad = rows.where(F.col("status") >= BAD).select("file", "block", "rid", "reason", "text")
    return (
        bad.join(F.broadcast(blocks), ["file", "block"])
        .select(
            "file",
            (F.col("before") + F.col("rid") - F.col("first_rid") + 1).cast("long").alias("line"),
            "reason",
            "text",
        )
        .orderBy("file", "line")
    )
