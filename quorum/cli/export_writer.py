"""Writing an export: one table at a time in bounded row groups, all or nothing.

Rows are buffered per column and written every `ROW_GROUP` rows, as a Parquet
row group (pyarrow) or as JSON Lines, so memory stays flat however long the
log is. The whole export is written into a hidden sibling directory and moved
into place by one rename at the end; a failure removes it, so a reader never
sees half an export.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import pyarrow as pa
import pyarrow.parquet as pq

from analytics.schema import SCHEMA_FILE, SCHEMA_VERSION, TABLES, Column

ROW_GROUP = 64 * 1024
ARROW_TYPES = {
    "int32": pa.int32(),
    "int64": pa.int64(),
    "double": pa.float64(),
    "string": pa.string(),
    "bool": pa.bool_(),
}


class ExportFailed(Exception):
    """Bad input: the message says what and where; nothing is left behind."""


def arrow_schema(columns: tuple[Column, ...]) -> pa.Schema:
    return pa.schema([pa.field(c.name, ARROW_TYPES[c.type], nullable=c.nullable) for c in columns])


class TableWriter:
    """Appends rows (tuples in the table's column order, without `schema_version`)."""

    def __init__(self, directory: Path, table: str, format_: str) -> None:
        self.columns = TABLES[table]
        self.names = [c.name for c in self.columns[1:]]
        self.schema = arrow_schema(self.columns)
        self.format = format_
        self.rows = 0
        self._buffer: list[tuple[Any, ...]] = []
        folder = directory / table
        folder.mkdir()
        self._parquet: pq.ParquetWriter | None = None
        self._jsonl: IO[str] | None = None
        if format_ == "parquet":
            self._parquet = pq.ParquetWriter(
                folder / "part-00000.parquet", self.schema, compression="zstd"
            )
        else:
            self._jsonl = (folder / "part-00000.jsonl").open("w", encoding="utf-8")

    def add(self, row: tuple[Any, ...]) -> None:
        self._buffer.append(row)
        if len(self._buffer) >= ROW_GROUP:
            self.flush()

    def flush(self) -> None:
        rows, self._buffer = self._buffer, []
        if not rows:
            return
        self.rows += len(rows)
        if self._parquet is not None:
            columns = [pa.array([SCHEMA_VERSION] * len(rows), pa.int32())]
            for i, column in enumerate(self.columns[1:]):
                values = [row[i] for row in rows]
                columns.append(pa.array(values, ARROW_TYPES[column.type]))
            self._parquet.write_table(pa.Table.from_arrays(columns, schema=self.schema))
        elif self._jsonl is not None:
            lines = []
            for row in rows:
                record = {
                    "schema_version": SCHEMA_VERSION,
                    **dict(zip(self.names, row, strict=True)),
                }
                lines.append(json.dumps(record, separators=(",", ":")))
            self._jsonl.write("\n".join(lines) + "\n")

    def close(self) -> None:
        self.flush()
        if self._parquet is not None:
            self._parquet.close()
        if self._jsonl is not None:
            self._jsonl.close()


@contextmanager
def export_directory(out: Path) -> Iterator[Path]:
    """A scratch directory that becomes `out` if the block succeeds, else vanishes.

    `out` must not exist yet (or be an empty directory): an export never mixes
    with, or overwrites, another one."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ExportFailed(f"{out} already exists and is not an empty directory")
    out.parent.mkdir(parents=True, exist_ok=True)
    scratch = out.parent / f".{out.name}.partial-{os.getpid()}"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir()
    try:
        yield scratch
        if out.exists():
            out.rmdir()
        scratch.rename(out)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise


def write_schema(directory: Path, document: dict[str, Any]) -> None:
    (directory / SCHEMA_FILE).write_text(json.dumps(document, indent=2) + "\n")
