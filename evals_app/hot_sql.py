"""The statements of a trial's hot path, without the ORM's query compiler.

Compiling a queryset into SQL costs more than running the statement on SQLite: most of what a
no-op trial's few UPDATEs and INSERTs cost was spent there. ``update_where`` and
``insert_rows`` build each statement's SQL once (per model and set of columns) and adapt every
value as its field's own ``get_db_prep_save`` would, so what reaches the database is what the
ORM would have sent. They are for simple statements only: equality on a row's columns, plain
inserts. ``insert_many`` writes rows already adapted (a trial's events, a batch's trials) in
as few statements of many rows as the database takes. ``execute`` runs any plain statement (the
trial's few reads too).

On SQLite each statement runs on the DB-API connection itself, under Django's error
translation and broken-transaction check: Django's cursor wrapper rewrote the ``%s`` of every
statement into ``?`` with a regular expression (10 µs even for a short UPDATE) and made two
wrapper objects per statement, together about as much as SQLite's own work for a row. Where
Django is asked to see the statements (``DEBUG``, a test capturing queries, an execute
wrapper), and on PostgreSQL, they go through its cursor as before.

A value already of its column's own Python type (a ``str`` for a text column, an ``int`` for an
integer or a key, a ``float``, a ``bool``) or None is sent as it is: that is what the field's
method returns for it, through four calls per value, and a trial's final row has two dozen.
Anything else (datetimes, JSON, an ``int`` for a float column) goes through the field, but on
SQLite the two the hot path writes most are made as Django's SQLite backend makes them, without
its four calls and two lookups of the connection: a UTC datetime as naive text, a dict or list
of a JSON field without an encoder as ``json.dumps`` of it.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connection, connections, models
from django.db.backends.sqlite3.base import FORMAT_QMARK_REGEX
from django.db.models.fields import AutoFieldMixin

# Field classes whose prepared value is the value itself when it already has this type.
_NATIVE_TYPES: tuple[tuple[type[models.Field], type], ...] = (
    (models.BooleanField, bool),
    (models.IntegerField, int),  # and its big, small, positive and auto kinds
    (models.FloatField, float),
    (models.CharField, str),
    (models.TextField, str),
)


def _field(model: type[models.Model], name: str) -> models.Field:
    return model._meta.pk if name == "pk" else model._meta.get_field(name)  # type: ignore[return-value]


def _column(model: type[models.Model], name: str) -> str:
    return connection.ops.quote_name(str(_field(model, name).column))


@lru_cache(maxsize=512)
def _preparer(model: type[models.Model], name: str, vendor: str) -> Callable[[Any], Any]:
    """How a value of ``model``'s field ``name`` is adapted for the ``vendor`` database."""
    return _field_preparer(_field(model, name), vendor)


def _native_type(field: models.Field) -> type | None:
    if isinstance(field, models.ForeignKey):  # a key holds its target's values
        return _native_type(field.target_field)
    return next((kind for cls, kind in _NATIVE_TYPES if isinstance(field, cls)), None)


def _field_preparer(field: models.Field, vendor: str) -> Callable[[Any], Any]:
    native = _native_type(field)
    prepare = field.get_db_prep_save
    if vendor == "sqlite":
        if isinstance(field, models.DateTimeField) and _utc_on_sqlite():
            return _sqlite_datetime_preparer(prepare)
        if isinstance(field, models.JSONField) and field.encoder is None:
            return _sqlite_json_preparer(prepare)

    def prepared(value: Any) -> Any:
        if value is None or type(value) is native:
            return value
        return prepare(value, connection)

    return prepared


def _utc_on_sqlite() -> bool:
    """Whether Django stores datetimes on this SQLite database as naive UTC text."""
    return bool(settings.USE_TZ) and connection.timezone_name == "UTC"


def _sqlite_datetime_preparer(prepare: Callable[..., Any]) -> Callable[[Any], Any]:
    """A UTC datetime (``timezone.now()``'s) as Django's SQLite backend writes it: made naive
    in UTC, then ``str``. Any other value goes through the field."""

    def prepared(value: Any) -> Any:
        if value is None:
            return None
        if type(value) is datetime and value.tzinfo is UTC:
            return str(value.replace(tzinfo=None))
        return prepare(value, connection)

    return prepared


def _sqlite_json_preparer(prepare: Callable[..., Any]) -> Callable[[Any], Any]:
    """A dict or list as Django's SQLite backend writes a JSONField without an encoder:
    ``json.dumps`` of it. Any other value goes through the field."""

    def prepared(value: Any) -> Any:
        if value is None:
            return None
        if type(value) is dict or type(value) is list:
            return json.dumps(value)
        return prepare(value, connection)

    return prepared


@lru_cache(maxsize=256)
def _update_sql(
    model: type[models.Model],
    columns: tuple[str, ...],
    where: tuple[str, ...],
    vendor: str,
    returning: tuple[str, ...],
    also_returning: tuple[str, ...],
) -> str:
    assignments = ", ".join(f"{_column(model, name)} = %s" for name in columns)
    conditions = " AND ".join(f"{_column(model, name)} = %s" for name in where)
    sql = f"UPDATE {connection.ops.quote_name(model._meta.db_table)} SET {assignments} WHERE {conditions}"
    if returning or also_returning:
        sql += " RETURNING " + ", ".join(
            [_column(model, name) for name in returning] + list(also_returning)
        )
    return sql


def update_where(
    model: type[models.Model],
    values: dict[str, Any],
    where: dict[str, Any],
    *,
    returning: Sequence[str] = (),
    also_returning: Sequence[str] = (),
) -> int | list[tuple]:
    """``UPDATE <model> SET values WHERE`` each of ``where`` equals its value: the number of
    rows changed, or with ``returning``, the changed rows' values of those fields, followed by
    those of the SQL expressions ``also_returning`` (subqueries about the row, say)."""
    vendor = connection.vendor  # each read of the connection proxy is a lookup of its own
    sql = _update_sql(
        model, tuple(values), tuple(where), vendor, tuple(returning), tuple(also_returning)
    )
    params = [_preparer(model, name, vendor)(value) for name, value in values.items()]
    params += [_preparer(model, name, vendor)(value) for name, value in where.items()]
    return execute(sql, params, fetch=bool(returning or also_returning))


@lru_cache(maxsize=64)
def _insert_sql(
    model: type[models.Model], vendor: str
) -> tuple[str, tuple[tuple[models.Field, Callable[[Any], Any], bool], ...]]:
    """The INSERT of one row of ``model``, and per column its field, its preparer and whether
    the field sets its value itself on insert (``auto_now``)."""
    quote = connection.ops.quote_name
    fields = tuple(
        field for field in model._meta.concrete_fields if not isinstance(field, AutoFieldMixin)
    )
    columns = ", ".join(quote(str(field.column)) for field in fields)
    placeholders = ", ".join("%s" for _ in fields)
    sql = f"INSERT INTO {quote(model._meta.db_table)} ({columns}) VALUES ({placeholders})"
    plan = tuple(
        (
            field,
            _field_preparer(field, vendor),
            bool(getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False)),
        )
        for field in fields
    )
    return sql, plan


def _insert_value(
    obj: models.Model, field: models.Field, prepare: Callable[[Any], Any], sets_itself: bool
) -> Any:
    """``obj``'s value of ``field`` as inserted (one column of ``_insert_sql``'s plan)."""
    return prepare(field.pre_save(obj, add=True) if sets_itself else getattr(obj, field.attname))


def insert_rows(model: type[models.Model], objects: Iterable[models.Model]) -> None:
    """Insert ``objects`` (instances of ``model``, not saved yet): one ``execute`` for one row,
    one ``executemany`` for more. Unlike ``bulk_create`` it does not set their primary keys:
    for rows nobody reads back here."""
    sql, plan = _insert_sql(model, connection.vendor)
    rows = [[_insert_value(obj, *column) for column in plan] for obj in objects]
    if len(rows) == 1:
        execute(sql, rows[0])
    elif rows:
        execute(sql, rows, many=True)


def insert_copies(
    model: type[models.Model], template: models.Model, changes: Sequence[dict[str, Any]]
) -> list[int]:
    """Insert one row per item of ``changes``: ``template``'s values (an instance of ``model``,
    not saved), with the item's fields (by attribute name: ``run_id``) set instead. Returns the
    new rows' primary keys, in order. The template's values are adapted once for all the rows,
    where ``bulk_create`` adapted every field of every row again: most of what a batch of many
    trials cost to record."""
    if not changes:
        return []
    sql, plan = _insert_sql(model, connection.vendor)
    varying = list(changes[0])
    shared = [
        None if column[0].attname in varying else _insert_value(template, *column)
        for column in plan
    ]
    slots = [
        (index, prepare, field.attname)
        for index, (field, prepare, _) in enumerate(plan)
        if field.attname in varying
    ]
    if len(slots) != len(varying) or any(list(change) != varying for change in changes):
        raise ValueError(f"every change names the same fields of {model.__name__}: {varying}")
    values: list[Any] = []
    for change in changes:
        row = list(shared)
        for index, prepare, name in slots:
            row[index] = prepare(change[name])
        values += row
    head, _, _ = sql.partition(" VALUES ")
    pk = connection.ops.quote_name(str(model._meta.pk.column))
    return [row[0] for row in insert_many(head, len(plan), values, returning=pk)]


def insert_many(
    head: str,
    width: int,
    values: Sequence[Any],
    *,
    most_rows: int | None = None,
    returning: str = "",
) -> list[tuple]:
    """Insert rows of ``width`` values given one after another in ``values`` (already adapted),
    as few statements of many rows as the database takes: ``head`` is the statement up to its
    VALUES (``INSERT INTO t (a, b)``), ``most_rows`` caps the rows of one statement. The rows
    of the SQL expression ``returning``, in order, if asked.

    Not ``executemany``: SQLite's driver steps the statement once per row and lets the
    interpreter lock go around each step, so a thread inserting many rows hands the lock to
    every other thread once a row (a third of a 100,000-event trial's time). One statement of
    many rows is one step."""
    per_statement = max(1, max_parameters() // width)
    if most_rows is not None:
        per_statement = min(per_statement, most_rows)
    per_statement *= width
    returned: list[tuple] = []
    for start in range(0, len(values), per_statement):
        chunk = values[start : start + per_statement]
        sql = _many_rows_sql(head, width, len(chunk) // width, returning)
        if returning:
            returned += execute(sql, chunk, fetch=True)
        else:
            execute(sql, chunk)
    return returned


@lru_cache(maxsize=32)
def _many_rows_sql(head: str, width: int, rows: int, returning: str) -> str:
    one_row = "(" + ", ".join(["%s"] * width) + ")"
    sql = f"{head} VALUES " + ", ".join([one_row] * rows)
    return f"{sql} RETURNING {returning}" if returning else sql


def max_parameters() -> int:
    """How many parameters one statement may take here (SQLite before 3.32 took 999)."""
    if connection.vendor == "sqlite":
        connection.ensure_connection()
        return int(connection.connection.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER))
    return 65535  # PostgreSQL's protocol


def execute(sql: str, params: Sequence[Any], *, many: bool = False, fetch: bool = False) -> Any:
    """Run one statement written with ``%s`` placeholders (``params``: one row's values, or
    with ``many`` a list of rows): the rows it returned with ``fetch``, else how many rows it
    changed. Errors are Django's (``IntegrityError``, ``OperationalError``...)."""
    db = connections[DEFAULT_DB_ALIAS]
    if db.vendor != "sqlite" or db.queries_logged or db.execute_wrappers:
        with db.cursor() as cursor:
            if many:
                cursor.executemany(sql, params)
            else:
                cursor.execute(sql, params)
            return list(cursor.fetchall()) if fetch else cursor.rowcount
    db.ensure_connection()
    db.validate_no_broken_transaction()
    with db.wrap_database_errors:
        run = db.connection.executemany if many else db.connection.execute
        cursor = run(_qmark(sql), params)
        return cursor.fetchall() if fetch else cursor.rowcount


@lru_cache(maxsize=256)
def _qmark(sql: str) -> str:
    """``sql`` with SQLite's placeholders, rewritten as Django's SQLite cursor rewrites it (its
    own pattern), once per statement's text."""
    return FORMAT_QMARK_REGEX.sub("?", sql).replace("%%", "%")
