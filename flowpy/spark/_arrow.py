"""Items in and out of Spark: rows and columnar batches to one Arrow table, Spark rows to dicts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Union

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, Row, SparkSession
    from pyspark.sql.types import StructType

__all__ = [
    "ArrowBatches",
    "ArrowTables",
    "SchemaLike",
    "arrow_schema",
    "dicts_of",
    "is_columnar",
    "row_to_dict",
    "rows_of",
    "struct_of",
]

SchemaLike = Union["StructType", str]
"""A Spark schema: a ``StructType`` or a DDL string such as ``"id BIGINT, name STRING"``."""


def row_to_dict(row: Row) -> dict[str, Any]:
    """Return a Spark row as a dict, nested rows included."""
    return row.asDict(recursive=True)


def dicts_of(table: pa.Table) -> list[dict[str, Any]]:
    """Return the rows of an Arrow table as dicts, the way :func:`row_to_dict` does."""
    rows: list[dict[str, Any]] = table.to_pylist()
    return rows


def is_columnar(item: object) -> bool:
    """Whether ``item`` is a columnar batch: a ``pyarrow.RecordBatch`` or ``Table``, or a ``pandas.DataFrame``."""
    if isinstance(item, Mapping):
        return False
    module = type(item).__module__
    return module.startswith(("pyarrow", "pandas"))


def rows_of(item: object) -> int:
    """Return the rows an item carries: 1 for a row, the batch's length for a columnar batch."""
    return len(item) if is_columnar(item) else 1  # type: ignore[arg-type]


def struct_of(schema: SchemaLike) -> StructType:
    """Return ``schema`` as a ``StructType``.

    Raises:
        TypeError: if ``schema`` is neither a ``StructType`` nor a DDL string.
    """
    from pyspark.sql.types import StructType

    if isinstance(schema, StructType):
        return schema
    if isinstance(schema, str):
        parsed = StructType.fromDDL(schema)
        if isinstance(parsed, StructType):
            return parsed
    raise TypeError(f"schema must be a StructType or a DDL string, got {schema!r}")


def arrow_schema(struct: StructType) -> pa.Schema:
    """Return the Arrow schema Spark uses for ``struct`` (timestamps in UTC)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(struct, timezone="UTC")


def _column(rows: Sequence[Any], name: str, index: int) -> list[Any]:
    try:
        return list(map(itemgetter(name), rows))  # every row has the key: one C-level pass
    except (KeyError, TypeError, ValueError):  # a missing key, or rows that are tuples
        return [_value(row, name, index) for row in rows]


def _value(row: Any, name: str, index: int) -> Any:
    """The field ``name`` of a mapping or a ``Row`` with fields, else the ``index``-th value of a tuple."""
    if isinstance(row, Mapping):
        return row.get(name)
    if hasattr(row, "__fields__"):  # a pyspark Row made with field names
        return row[name] if name in row.__fields__ else None
    return row[index] if index < len(row) else None


class ArrowTables:
    """Turns a batch of items (rows, or columnar batches) into one Arrow table of the stream's schema.

    A row is a mapping, a ``pyspark.sql.Row``, or a tuple whose values are
    in the schema's order. With a schema, every batch is converted to it.
    Without one, the first batch whose columns all have a type (no column is
    only ``None``) fixes the schema for the batches after it, so that every
    batch of one stream has the same columns and types.

    Rows are converted column by column (one list per column, then one
    Arrow array each); a ``RecordBatch``, ``Table`` or ``pandas.DataFrame``
    is taken as it is, with no per-row Python work.

    With a schema, :meth:`table` only reads the converter's state, so
    threads may convert batches at once; without one, one converter serves
    one stream, one batch at a time.
    """

    def __init__(self, schema: SchemaLike | None) -> None:
        """Raises:
        TypeError: if ``schema`` is neither ``None``, a ``StructType`` nor a string.
        """
        self._struct = None if schema is None else struct_of(schema)
        self._arrow_schema: pa.Schema | None = None if self._struct is None else arrow_schema(self._struct)

    def table(self, items: Sequence[Any]) -> pa.Table:
        """Return ``items`` as one Arrow table of the stream's schema.

        Raises:
            pyarrow.ArrowException: if an item does not fit the schema.
            KeyError: if a columnar batch lacks a column of the schema.
        """
        import pyarrow as pa

        parts: list[pa.Table] = []
        rows: list[Any] = []
        for item in items:
            if is_columnar(item):
                if rows:
                    parts.append(self._rows_table(rows))
                    rows = []
                parts.append(self._fit(self._columnar_table(item)))
            else:
                rows.append(item)
        if rows:
            parts.append(self._rows_table(rows))
        table = parts[0] if len(parts) == 1 else pa.concat_tables(parts, promote_options="permissive")
        if self._arrow_schema is None and not any(pa.types.is_null(f.type) for f in table.schema):
            self._arrow_schema = table.schema
        return table

    def _rows_table(self, rows: Sequence[Any]) -> pa.Table:
        import pyarrow as pa

        schema = self._arrow_schema
        if schema is not None:
            columns = [pa.array(_column(rows, field.name, i), type=field.type) for i, field in enumerate(schema)]
            return pa.Table.from_arrays(columns, schema=schema)
        names = list(dict.fromkeys(name for row in rows for name in row))
        return pa.table({name: _column(rows, name, i) for i, name in enumerate(names)})

    @staticmethod
    def _columnar_table(item: Any) -> pa.Table:
        import pyarrow as pa

        if isinstance(item, pa.Table):
            return item
        if isinstance(item, pa.RecordBatch):
            return pa.Table.from_batches([item])
        return pa.Table.from_pandas(item, preserve_index=False)

    def _fit(self, table: pa.Table) -> pa.Table:
        schema = self._arrow_schema
        if schema is None or table.schema.equals(schema):
            return table
        return table.select(schema.names).cast(schema)

    @property
    def struct(self) -> StructType | None:
        """The Spark schema given at construction, if any."""
        return self._struct

    @property
    def arrow_schema(self) -> pa.Schema | None:
        """The stream's Arrow schema: the given one, or the one the first fully typed batch fixed."""
        return self._arrow_schema


class ArrowBatches(ArrowTables):
    """An :class:`ArrowTables` that also makes Spark DataFrames of its tables.

    Not thread-safe: one converter serves one stream, one batch at a time.
    """

    def __init__(self, spark: SparkSession, schema: SchemaLike | None) -> None:
        """Raises:
        TypeError: if ``schema`` is neither ``None``, a ``StructType`` nor a string.
        """
        super().__init__(schema)
        self._spark = spark

    def dataframe(self, items: Sequence[Any]) -> DataFrame:
        """Return ``items`` as a Spark DataFrame, built from one Arrow table."""
        return self.frame(self.table(items))

    def frame(self, table: pa.Table) -> DataFrame:
        """Return an Arrow table from :meth:`table` as a Spark DataFrame."""
        if self._struct is None:
            return self._spark.createDataFrame(table)
        return self._spark.createDataFrame(table, schema=self._struct)
