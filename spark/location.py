"""Where a run or a report lives: a plain local path, or a URI (``file://``, ``hdfs://``,
``s3a://``, any filesystem both pyarrow and the Spark cluster know).

Spark reads and writes the big data itself, by URI; the driver lists the run, reads its small files
(journal.json, run.json), reads small Parquet tables back and writes summary.json and report.html
through ``pyarrow.fs``, so that a run on a cluster's filesystem needs no local copy. The two name
one place differently only where Hadoop and pyarrow disagree: Hadoop's ``s3a://`` is pyarrow's
``s3://``. A plain path is a local one and Spark is given it as ``file://``, so a cluster whose
default filesystem is HDFS still reads what the driver listed.
"""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from magnetar.spark.errors import BadInputError

#: ``scheme:/…``: a URI; anything else is a local path (a path named ``a:b`` stays a path)
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:/")
#: Hadoop's scheme -> pyarrow's, where they differ (both S3 clients read the same buckets)
_DRIVER_SCHEME = {"s3a": "s3", "s3n": "s3"}


@dataclass(frozen=True, eq=False)
class Location:
    """One file or directory: ``shown`` as the user named it (messages, summary.json), ``path`` in
    the driver's pyarrow filesystem ``fs``, ``spark`` the URI Spark is given."""

    shown: str
    fs: pafs.FileSystem
    path: str
    spark: str
    uri: bool  # named by a URI (children are joined with "/"), not a local path

    @classmethod
    def of(cls, where: Where) -> Location:
        """The location a CLI argument or a caller's path names; BadInputError if pyarrow cannot
        open its filesystem (an unknown scheme, no libhdfs, no S3 credentials…)."""
        if isinstance(where, Location):
            return where
        text = os.fspath(where)
        if not _URI.match(text):
            local = Path(text).resolve()
            return cls(str(Path(text)), pafs.LocalFileSystem(), str(local), f"file://{local}", False)
        text = text.rstrip("/")
        scheme, rest = text.split(":", 1)
        try:
            fs, path = pafs.FileSystem.from_uri(_DRIVER_SCHEME.get(scheme.lower(), scheme) + ":" + rest)
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise BadInputError(f"{text}: cannot open its filesystem (pyarrow: {exc})") from exc
        if isinstance(fs, pafs.LocalFileSystem):
            # pyarrow has decoded %-escapes; Hadoop takes a path as it is written
            local = Path(path).resolve()
            return cls(text, fs, str(local), f"file://{local}", True)
        return cls(text, fs, path.rstrip("/"), text, True)

    def __truediv__(self, name: str) -> Location:
        shown = f"{self.shown}/{name}" if self.uri else str(Path(self.shown) / name)
        return Location(shown, self.fs, f"{self.path}/{name}", f"{self.spark}/{name}", self.uri)

    def __str__(self) -> str:
        return self.shown

    def __fspath__(self) -> str:
        # a local report's files can be opened by anything that takes a path, as before URIs
        if not self.local:
            raise TypeError(f"{self.shown} is not on the local filesystem")
        return self.path

    @property
    def local(self) -> bool:
        return isinstance(self.fs, pafs.LocalFileSystem)

    @property
    def name(self) -> str:
        return self.path.rstrip("/").rsplit("/", 1)[-1]

    def _info(self) -> pafs.FileInfo:
        try:
            return self.fs.get_file_info(self.path)
        except OSError as exc:
            raise BadInputError(f"{self.shown}: not reachable ({exc})") from exc

    def exists(self) -> bool:
        return bool(self._info().type != pafs.FileType.NotFound)

    def is_dir(self) -> bool:
        return bool(self._info().type == pafs.FileType.Directory)

    def size(self) -> int:
        """Bytes in this file (0 for anything else)."""
        return int(self._info().size or 0)

    def files(self, prefix: str = "", suffix: str = "") -> list[Location]:
        """The files directly in this directory named ``prefix…suffix``, by name; none if it is not
        a directory."""
        if not self.is_dir():
            return []
        try:
            found = self.fs.get_file_info(pafs.FileSelector(self.path))
        except OSError as exc:
            raise BadInputError(f"{self.shown}: not listable ({exc})") from exc
        names = [
            info.base_name
            for info in found
            if info.type == pafs.FileType.File
            and info.base_name.startswith(prefix)
            and info.base_name.endswith(suffix)
        ]
        return [self / name for name in sorted(names)]

    def read_text(self) -> str:
        with self.fs.open_input_stream(self.path) as stream:
            data: bytes = stream.read()
        return data.decode()

    def write_text(self, text: str) -> None:
        with self.fs.open_output_stream(self.path) as stream:
            stream.write(text.encode())

    def mkdir(self) -> None:
        self.fs.create_dir(self.path, recursive=True)

    def remove(self) -> None:
        """Remove this directory and everything in it; nothing if it is not there."""
        with contextlib.suppress(FileNotFoundError):
            self.fs.delete_dir(self.path)

    def read_parquet(self, columns: list[str] | None = None) -> pa.Table:
        return pq.read_table(self.path, columns=columns, filesystem=self.fs)

    def parquet_rows(self) -> int:
        """Rows in a Parquet file, from its footer."""
        with self.fs.open_input_file(self.path) as file:
            rows: int = pq.read_metadata(file).num_rows
        return rows


#: what a caller may name a location by
Where = str | os.PathLike[str] | Location
