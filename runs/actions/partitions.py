"""The event table's partitions on PostgreSQL: by ranges of the run's key, one range per month.

``runs_event`` is partitioned by ``RANGE (run_id)`` (migration 0032). Every event of a run is in
the one partition that holds its run's key, so a run is never split between partitions: a
partition is dropped whole or kept whole, with all its runs (nothing is half-deleted), and the
key ``(run_id, seq)`` stays the table's primary key (it contains the partition key, as PostgreSQL
asks), so the ORM reads and writes the same model as on SQLite. A read of one run's events is
pruned to its one partition.

Ranges follow time because the run keys do: the run table's identity sequence only grows, and at
the first maintenance of a month :func:`ensure_partitions` moves the sequence to the start of the
next range (``setval``; the unused keys of the old range are never given out), so the runs
created in a month get keys in ranges of their own. Ranges are ``WORKBENCH_EVENT_PARTITION_RUNS``
keys wide (a month creating more runs than that fills the next range, and so on); ``AHEAD``
ranges above the current one always exist, so an insert never meets a key without a partition.
The rows the table held when it was converted are one partition (``runs_event_r0``, keys below
the first range): history from before is dropped with it once all of it is out of retention.

:func:`ensure_partitions` is the maintenance: run by the migration, after every ``migrate``
(``post_migrate``) and by the workers' periodic job ``event-partitions`` (hourly). It creates the
upcoming ranges as empty tables and ATTACHes them (a lock that neither readers nor writers wait
on; ``CREATE TABLE ... PARTITION OF`` would take an exclusive lock on the whole table).

pg_partman is not used, even when the server has it: its id-based partitioning creates ranges
ahead as this does, but it does not start a range at the turn of a month (the sequence step
above), and its retention drops a range by age alone, where ours keeps a range that still holds a
kept run (``runs.actions.retention``).

SQLite has no partitions: everything here answers "nothing to do" there.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass
from datetime import UTC, datetime

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

TABLE = "runs_event"
PREFIX = "runs_event_r"  # + the range's first key (runs_event_r0: the rows from before the conversion)
AHEAD = 2  # empty ranges kept above the one new runs get their keys in
LOCK = zlib.crc32(b"workbench:event-partitions")  # one maintenance (create, leap, detach) at a time
_BOUND = re.compile(r"FROM \((?P<low>[^)]*)\) TO \((?P<high>[^)]*)\)")


@dataclass(frozen=True)
class Partition:
    name: str
    low: int | None  # None: MINVALUE
    high: int | None  # None: MAXVALUE

    def holds(self, key: int) -> bool:
        return (self.low is None or self.low <= key) and (self.high is None or key < self.high)


def width() -> int:
    return int(getattr(settings, "WORKBENCH_EVENT_PARTITION_RUNS", 1_000_000))


def _bound(text: str) -> int | None:
    text = text.strip().strip("'")
    return None if text.upper() in ("MINVALUE", "MAXVALUE") else int(text)


def partitioned() -> bool:
    """Whether ``runs_event`` is a partitioned table here (PostgreSQL after migration 0032)."""
    if connection.vendor != "postgresql":
        return False
    with connection.cursor() as cursor:
        cursor.execute("SELECT relkind FROM pg_class WHERE oid = to_regclass(%s)", [TABLE])
        row = cursor.fetchone()
    return bool(row) and row[0] == "p"


def partitions(cursor) -> list[Partition]:
    """The attached partitions, by their first key (MINVALUE first)."""
    cursor.execute(
        "SELECT c.relname, pg_get_expr(c.relpartbound, c.oid) FROM pg_inherits i"
        " JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = to_regclass(%s)",
        [TABLE],
    )
    found = []
    for name, bound in cursor.fetchall():
        match = _BOUND.search(bound or "")
        if match:
            found.append(Partition(name, _bound(match["low"]), _bound(match["high"])))
    return sorted(found, key=lambda p: (p.low is not None, p.low or 0))


def _sequence(cursor) -> str:
    cursor.execute("SELECT pg_get_serial_sequence('runs_run', 'id')")
    return cursor.fetchone()[0]


def next_key(cursor) -> int:
    """The key the next run will get (the sequence's next value, not taken)."""
    cursor.execute(f"SELECT last_value, is_called FROM {_sequence(cursor)}")
    last, called = cursor.fetchone()
    return last + 1 if called else last


def _create(cursor, low: int, high: int) -> str:
    """An empty table like the parent with the parent's indexes, each named after the parent's
    (``runs_event_r<low>_event_run_span``: a plan names the index it reads), attached as
    ``[low, high)``: the attach adopts them and locks the parent SHARE UPDATE EXCLUSIVE only."""
    name = f"{PREFIX}{low}"
    cursor.execute(
        f"CREATE TABLE {name} (LIKE {TABLE} INCLUDING DEFAULTS INCLUDING CONSTRAINTS"
        " INCLUDING STORAGE INCLUDING COMPRESSION)"
    )
    for definition in partition_indexes(cursor, name):
        cursor.execute(definition)
    cursor.execute(f"ALTER TABLE {TABLE} ATTACH PARTITION {name} FOR VALUES FROM ({low}) TO ({high})")
    return name


_INDEX = re.compile(
    r"^CREATE (?P<unique>UNIQUE )?INDEX (?P<name>\S+) ON (?:ONLY )?\S+ (?P<rest>USING .*)$", re.S
)


def partition_indexes(cursor, partition: str) -> list[str]:
    """``CREATE INDEX`` statements of the parent's indexes (but its key) for ``partition``, in the
    order they were made (the planner, between two indexes it costs the same, takes the one made
    last: the order the plain table had keeps its plans)."""
    cursor.execute(
        "SELECT pg_get_indexdef(x.indexrelid) FROM pg_index x"
        " WHERE x.indrelid = to_regclass(%s) AND NOT x.indisprimary ORDER BY x.indexrelid",
        [TABLE],
    )
    statements = []
    for (definition,) in cursor.fetchall():
        match = _INDEX.match(definition)
        if match:
            index = f"{partition}_{match['name']}"[:63]
            statements.append(f"CREATE {match['unique'] or ''}INDEX {index} ON {partition} {match['rest']}")
    return statements


def lock(cursor) -> None:
    """The maintenance's advisory lock, for the transaction."""
    cursor.execute("SELECT pg_advisory_xact_lock(%s)", [LOCK])


def ensure_partitions(now: datetime | None = None) -> list[str]:
    """Create the ranges ahead and, at the first run of a month, move new runs to a fresh range.
    Returns the partitions created. Idempotent; one at a time (an advisory lock)."""
    if not partitioned():
        return []
    now = (now or timezone.now()).astimezone(UTC)
    created: list[str] = []
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL lock_timeout = '10s'")
        lock(cursor)
        created += _ahead(cursor)
        current = _current(cursor)
        if current is not None and current.high is not None and _opened_before(cursor, current, now):
            # the runs of this month start at the next range (it exists: AHEAD >= 1)
            cursor.execute("SELECT setval(%s, %s, true)", [_sequence(cursor), current.high - 1])
            created += _ahead(cursor)
    return created


def _current(cursor) -> Partition | None:
    key = next_key(cursor)
    return next((p for p in partitions(cursor) if p.holds(key)), None)


def _opened_before(cursor, part: Partition, now: datetime) -> bool:
    """Whether the range's first run was created in an earlier month than ``now``."""
    cursor.execute(
        "SELECT created_at FROM runs_run WHERE id >= %s AND id < %s ORDER BY id LIMIT 1",
        [part.low if part.low is not None else -(2**63), part.high],
    )
    row = cursor.fetchone()
    if row is None:
        return False
    first = row[0].astimezone(UTC)
    return (first.year, first.month) < (now.year, now.month)


def _ahead(cursor) -> list[str]:
    """Ranges up to AHEAD above the one holding the next key (and that one, if missing)."""
    created = []
    key = next_key(cursor)
    parts = partitions(cursor)
    top = max((p.high for p in parts if p.high is not None), default=None)
    if top is None or top <= key:  # nothing holds the next key: a range from there
        low = key if top is None else top
        created.append(_create(cursor, low, max(low, key) + width()))
        top = max(low, key) + width()
    above = sum(1 for p in partitions(cursor) if p.low is not None and p.low > key)
    for _ in range(AHEAD - above):
        created.append(_create(cursor, top, top + width()))
        top += width()
    return created


def closed(cursor, part: Partition) -> bool:
    """No new run can get a key in this range any more (the sequence is past it)."""
    return part.high is not None and part.high <= next_key(cursor)


def detach_and_drop(part: Partition) -> None:
    """Take the partition out of the table and drop it. Outside a transaction: ``DETACH ...
    CONCURRENTLY`` (readers and writers of the other partitions wait on nothing; it waits for the
    queries that started before it). Inside one (the tests' transactions): a plain DETACH, which
    takes the table's exclusive lock for the moment of the catalog change."""
    with connection.cursor() as cursor:
        if connection.in_atomic_block:
            cursor.execute("SET LOCAL lock_timeout = '10s'")
            lock(cursor)
            cursor.execute(f"ALTER TABLE {TABLE} DETACH PARTITION {part.name}")
        else:
            cursor.execute("SELECT pg_advisory_lock(%s)", [LOCK])
            try:
                cursor.execute(f"ALTER TABLE {TABLE} DETACH PARTITION {part.name} CONCURRENTLY")
            finally:
                cursor.execute("SELECT pg_advisory_unlock(%s)", [LOCK])
        cursor.execute(f"DROP TABLE IF EXISTS {part.name}")  # finish_detaches may have been first


def after_migrate(sender, using=None, **kwargs) -> None:
    """``post_migrate``: the ranges ahead, and the month's range (at ``migrate`` time too)."""
    if using in (None, "default"):
        ensure_partitions()


def maintain() -> list[str]:
    """The periodic job ``event-partitions``: an interrupted drop finished, the ranges ahead."""
    return finish_detaches() + ensure_partitions()


def finish_detaches() -> list[str]:
    """What an interrupted drop left: a detach still pending (FINALIZE it) and ranges detached but
    not dropped (tables named like a range that are no partition any more). Returns the dropped."""
    if not partitioned():
        return []
    dropped = []
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
            " WHERE i.inhparent = to_regclass(%s) AND i.inhdetachpending",
            [TABLE],
        )
        for (name,) in cursor.fetchall():
            cursor.execute(f"ALTER TABLE {TABLE} DETACH PARTITION {name} FINALIZE")
        cursor.execute(
            "SELECT relname FROM pg_class WHERE relkind = 'r' AND NOT relispartition"
            " AND relnamespace = current_schema()::regnamespace AND relname ~ %s",
            [f"^{PREFIX}[0-9]+$"],
        )
        for (name,) in cursor.fetchall():
            cursor.execute(f"DROP TABLE {name}")
            dropped.append(name)
    return dropped
