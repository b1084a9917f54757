"""Rows in and out of Spark: dicts to a DataFrame through Arrow, Spark rows to dicts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Union

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, Row, SparkSession
    from pyspark.sql.types import StructType

__all__ = ["ArrowBatches", "SchemaLike", "dicts_of", "row_to_dict"]

SchemaLike = Union["StructType", str]
"""A Spark schema: a ``StructType`` or a DDL string such as ``"id BIGINT, name STRING"``."""


def row_to_dict(row: Row) -> dict[str, Any]:
    """Return a Spark row as a dict, nested rows included."""
    return row.asDict(recursive=True)


def dicts_of(table: pa.Table) -> list[dict[str, Any]]:
    """Return the rows of an Arrow table as dicts, the way :func:`row_to_dict` does."""
    rows: list[dict[str, Any]] = table.to_pylist()
    return rows


def _struct(schema: SchemaLike) -> StructType:
    from pyspark.sql.types import StructType

    if isinstance(schema, StructType):
        return schema
    if isinstance(schema, str):
        parsed = StructType.fromDDL(schema)
        if isinstance(parsed, StructType):
            return parsed
    raise TypeError(f"schema must be a StructType or a DDL string, got {schema!r}")


class ArrowBatches:
    """Turns batches of dict rows into Spark DataFrames through Arrow.

    With a schema, every batch is converted to it. Without one, the first
    batch whose columns all have a type (no column is only ``None``) fixes
    the schema for the batches after it, so that every batch of one stream
    has the same columns and types.

    Not thread-safe: one converter serves one stream, one batch at a time.
    """

    def __init__(self, spark: SparkSession, schema: SchemaLike | None) -> None:
        """Raises:
        TypeError: if ``schema`` is neither ``None``, a ``StructType`` nor a string.
        """
        self._spark = spark
        self._struct = None if schema is None else _struct(schema)
        self._arrow_schema: pa.Schema | None = None
        if self._struct is not None:
            from pyspark.sql.pandas.types import to_arrow_schema

            self._arrow_schema = to_arrow_schema(self._struct, timezone="UTC")

    def table(self, rows: Sequence[Mapping[str, Any]]) -> pa.Table:
        """Return ``rows`` as an Arrow table of the stream's schema.

        Raises:
            pyarrow.ArrowException: if a row does not fit the schema.
        """
        import pyarrow as pa

        table = pa.Table.from_pylist(list(rows), schema=self._arrow_schema)
        if self._arrow_schema is None and not any(pa.types.is_null(f.type) for f in table.schema):
            self._arrow_schema = table.schema
        return table

    def dataframe(self, rows: Sequence[Mapping[str, Any]]) -> DataFrame:
        """Return ``rows`` as a Spark DataFrame, built from one Arrow table."""
        table = self.table(rows)
        if self._struct is None:
            return self._spark.createDataFrame(table)
        return self._spark.createDataFrame(table, schema=self._struct)

