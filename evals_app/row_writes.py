"""Row writes on a trial's hot path, without the ORM's query compiler.

Compiling a queryset into SQL costs more than running the statement on SQLite: most of what a
no-op trial's few UPDATEs and INSERTs cost was spent there. These helpers build each
statement's SQL once (per model and set of columns) and adapt every value with its field's own
``get_db_prep_save``, so what reaches the database is what the ORM would have sent. They are
for simple statements only: equality on a row's columns, plain inserts.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any

from django.db import connection, models
from django.db.models.fields import AutoFieldMixin


def _field(model: type[models.Model], name: str) -> models.Field:
    return model._meta.pk if name == "pk" else model._meta.get_field(name)  # type: ignore[return-value]


def _column(model: type[models.Model], name: str) -> str:
    return connection.ops.quote_name(str(_field(model, name).column))


def _prep(model: type[models.Model], name: str, value: Any) -> Any:
    return _field(model, name).get_db_prep_save(value, connection)


@lru_cache(maxsize=256)
def _update_sql(
    model: type[models.Model],
    columns: tuple[str, ...],
    where: tuple[str, ...],
    vendor: str,
    returning: tuple[str, ...],
) -> str:
    assignments = ", ".join(f"{_column(model, name)} = %s" for name in columns)
    conditions = " AND ".join(f"{_column(model, name)} = %s" for name in where)
    sql = f"UPDATE {connection.ops.quote_name(model._meta.db_table)} SET {assignments} WHERE {conditions}"
    if returning:
        sql += " RETURNING " + ", ".join(_column(model, name) for name in returning)
    return sql


def update_where(
    model: type[models.Model],
    values: dict[str, Any],
    where: dict[str, Any],
    *,
    returning: Sequence[str] = (),
) -> int | list[tuple]:
    """``UPDATE <model> SET values WHERE`` each of ``where`` equals its value: the number of
    rows changed, or with ``returning``, the changed rows' values of those fields."""
    sql = _update_sql(model, tuple(values), tuple(where), connection.vendor, tuple(returning))
    params = [_prep(model, name, value) for name, value in values.items()]
    params += [_prep(model, name, value) for name, value in where.items()]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        if returning:
            return list(cursor.fetchall())
        return cursor.rowcount


@lru_cache(maxsize=64)
def _insert_sql(model: type[models.Model], vendor: str) -> tuple[str, tuple[models.Field, ...]]:
    quote = connection.ops.quote_name
    fields = tuple(
        field for field in model._meta.concrete_fields if not isinstance(field, AutoFieldMixin)
    )
    columns = ", ".join(quote(str(field.column)) for field in fields)
    placeholders = ", ".join("%s" for _ in fields)
    return f"INSERT INTO {quote(model._meta.db_table)} ({columns}) VALUES ({placeholders})", fields


def insert_rows(model: type[models.Model], objects: Iterable[models.Model]) -> None:
    """Insert ``objects`` (instances of ``model``, not saved yet) in one ``executemany``. Unlike
    ``bulk_create`` it does not set their primary keys: for rows nobody reads back here."""
    sql, fields = _insert_sql(model, connection.vendor)
    rows = [
        [field.get_db_prep_save(field.pre_save(obj, add=True), connection) for field in fields]
        for obj in objects
    ]
    if rows:
        with connection.cursor() as cursor:
            cursor.executemany(sql, rows)
