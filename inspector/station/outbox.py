"""The durable result outbox: SQLite in WAL mode, one row per unacknowledged result.

A result is committed here before it is published and deleted only when the
broker acknowledged it (PUBACK), so a broker outage, a crash or a power cut
between "decided" and "delivered" loses nothing: on restart the rows still here
are published again, in ``seq`` order.

Durability choice: ``journal_mode=WAL`` with ``synchronous=FULL`` (the default
here). In WAL mode ``NORMAL`` already survives the death of the process (SIGKILL,
OOM kill), because a commit has been written to the WAL file in the kernel's page
cache before :meth:`Outbox.put` returns. It does not survive losing the machine
(power cut, kernel panic, a Jetson pulled off the line): the last commits can roll
back. ``FULL`` adds one fsync of the WAL per commit, which costs well under a
millisecond on an SSD and a few on eMMC against a part budget of ~10 ms, so the
promise "once put() returns, the result exists" holds for power loss too. Pass
``synchronous="NORMAL"`` to trade that for speed where the host has a UPS.
Removing acknowledged rows (:meth:`Outbox.ack_many`) always commits with ``NORMAL``:
a delete lost to a power cut only re-publishes a result, which receivers de-duplicate.

One process owns an outbox at a time (an exclusive ``flock`` on ``PATH.lock``,
released by the kernel when the process dies, so a SIGKILLed station restarts
cleanly). Inside the process every method is thread-safe: the MQTT publisher
acknowledges from its own thread while the station thread puts.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inspector.errors import StationError
from inspector.station.result import Result

log = logging.getLogger(__name__)

_SCHEMA_SQL = """
CREATE TABLE IF NOT EXISTS results (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    payload TEXT NOT NULL
)
"""
#: Results a broker would not take (see :meth:`Outbox.dead_letter`).
_DEAD_SQL = """
CREATE TABLE IF NOT EXISTS dead_letters (
    seq INTEGER PRIMARY KEY,
    id TEXT NOT NULL,
    payload TEXT NOT NULL,
    reason TEXT NOT NULL,
    moved_at REAL NOT NULL
)
"""


def _document(result: Result | Mapping[str, Any] | str) -> dict[str, Any]:
    """The result as a fresh dict with a non-empty string ``id``."""
    if isinstance(result, Result):
        doc = result.to_dict()
    elif isinstance(result, Mapping):
        doc = dict(result)
    else:
        doc = json.loads(result)
        if not isinstance(doc, dict):
            raise ValueError("an outbox entry must be a JSON object")
    rid = doc.get("id")
    if not isinstance(rid, str) or not rid:
        raise ValueError("a result needs a non-empty string 'id'")
    return doc


def _duplicate(db: sqlite3.Connection, rows: list[tuple[int, str, str]]) -> str:
    """The first id of ``rows`` already pending (or repeated within ``rows``)."""
    seen: set[str] = set()
    for _, rid, _ in rows:
        if rid in seen or db.execute("SELECT 1 FROM results WHERE id = ?", (rid,)).fetchone():
            return rid
        seen.add(rid)
    return rows[0][1]


@dataclass(frozen=True)
class OutboxItem:
    """One unacknowledged result.

    :param seq: its sequence number (commit order).
    :param id: the result id.
    :param payload: the JSON text to publish (carries ``seq``).
    """

    seq: int
    id: str
    payload: str


class Outbox:
    """A durable FIFO of result JSON documents.

    :param path: SQLite file (created with its folder when missing).
    :param limit: depth at which :attr:`full` turns true; the station then stops taking
        parts. :meth:`put` never refuses a result because of the limit: a decided part
        is always kept.
    :param synchronous: ``FULL`` (default, survives power loss) or ``NORMAL`` (survives
        process death only); see the module docstring.
    :raises StationError: the file cannot be opened, is not an outbox, or another process
        holds it.
    """

    def __init__(
        self, path: str | os.PathLike[str], limit: int = 50_000, *, synchronous: str = "FULL"
    ):
        self.path = Path(path)
        if int(limit) < 1:
            raise StationError(f"outbox limit must be at least 1, got {limit}")
        sync = str(synchronous).upper()
        if sync not in ("FULL", "NORMAL", "EXTRA"):
            raise StationError(f"outbox synchronous must be FULL or NORMAL, got {synchronous!r}")
        self.limit = int(limit)
        self.synchronous = sync
        self._lock = threading.RLock()
        self._lockfile: Any = None
        self._db: sqlite3.Connection | None = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StationError(f"outbox {self.path}: cannot create its folder: {exc}") from None
        self._take_lock()
        try:
            self._open()
        except BaseException:
            self._release_lock()
            raise

    # -- opening ---------------------------------------------------------------------
    def _take_lock(self) -> None:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX: no cross-process guard
            return
        lock_path = self.path.with_name(self.path.name + ".lock")
        try:
            fh = open(lock_path, "a+")  # held open while the outbox lives
        except OSError as exc:
            raise StationError(f"outbox {self.path}: cannot open {lock_path}: {exc}") from None
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            fh.close()
            # Two stations publishing one outbox would double-send and race on acks.
            raise StationError(
                f"outbox {self.path} is in use by another process (lock {lock_path})"
            ) from None
        self._lockfile = fh

    def _release_lock(self) -> None:
        if self._lockfile is not None:
            self._lockfile.close()  # closing drops the flock
            self._lockfile = None

    def _open(self) -> None:
        try:
            # isolation_level=None: autocommit, so each statement below is its own
            # transaction and put()/ack() have committed when they return.
            db = sqlite3.connect(
                str(self.path), timeout=10.0, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise StationError(f"outbox {self.path}: cannot open: {exc}") from None
        try:
            mode = db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise StationError(
                    f"outbox {self.path}: the file system does not support SQLite WAL mode "
                    f"(journal_mode={mode}); put the outbox on a local disk"
                )
            db.execute(f"PRAGMA synchronous={self.synchronous}")
            db.execute(_SCHEMA_SQL)
            db.execute(_DEAD_SQL)
            self._depth = int(db.execute("SELECT COUNT(*) FROM results").fetchone()[0])
            self._dead = int(db.execute("SELECT COUNT(*) FROM dead_letters").fetchone()[0])
            row = db.execute("SELECT seq FROM sqlite_sequence WHERE name='results'").fetchone()
            top = db.execute("SELECT MAX(seq) FROM results").fetchone()[0]
            # sqlite_sequence remembers the highest seq ever used, even after every row
            # was acknowledged, so seq never goes back while the file lives.
            self._last_seq = max(int(row[0]) if row else 0, int(top or 0))
        except sqlite3.DatabaseError as exc:
            db.close()
            raise StationError(f"outbox {self.path}: not a usable outbox database: {exc}") from None
        except BaseException:
            db.close()
            raise
        self._db = db
        if self._depth:
            log.info("outbox %s: %d unacknowledged results from before", self.path, self._depth)
        if self._dead:
            log.warning(
                "outbox %s: %d results in the dead-letter table (never delivered; see "
                "Outbox.dead_letters)", self.path, self._dead,
            )  # fmt: skip

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            raise StationError(f"outbox {self.path} is closed")
        return self._db

    # -- writing ---------------------------------------------------------------------
    def put(self, result: Result | Mapping[str, Any] | str) -> int:
        """Commit one result and return its ``seq``; it is durable when this returns.

        The next sequence number is written into the stored JSON (and into ``result.seq``
        for a :class:`Result`), so what is published carries it.

        :param result: a :class:`Result`, a result dict, or its JSON text (with an ``id``).
        :raises ValueError: the document has no ``id``, or that id is already pending.
        :raises StationError: the commit failed (disk full, I/O error).
        """
        return self.put_many([result])[0]

    def put_many(self, results: Iterable[Result | Mapping[str, Any] | str]) -> list[int]:
        """Commit several results in one transaction (one fsync); returns their seqs.

        All or nothing: on any error none of them is committed.

        :param results: as for :meth:`put`.
        :raises ValueError: a document has no ``id``, or an id is already pending.
        :raises StationError: the commit failed (disk full, I/O error).
        """
        items = list(results)
        docs = [_document(r) for r in items]
        if not docs:
            return []
        with self._lock:
            db = self._conn()
            first = self._last_seq + 1
            rows = []
            for seq, doc in enumerate(docs, start=first):
                doc["seq"] = seq
                rows.append(
                    (seq, doc["id"], json.dumps(doc, separators=(",", ":"), allow_nan=False))
                )
            try:
                if len(rows) == 1:
                    db.execute("INSERT INTO results (seq, id, payload) VALUES (?, ?, ?)", rows[0])
                else:
                    db.execute("BEGIN IMMEDIATE")
                    db.executemany("INSERT INTO results (seq, id, payload) VALUES (?, ?, ?)", rows)
                    db.execute("COMMIT")
            except sqlite3.IntegrityError:
                self._rollback(db)
                raise ValueError(
                    f"result id {_duplicate(db, rows)} is already in the outbox"
                ) from None
            except sqlite3.Error as exc:
                self._rollback(db)
                raise StationError(f"outbox {self.path}: cannot commit a result: {exc}") from None
            self._last_seq = first + len(rows) - 1
            self._depth += len(rows)
        seqs = [r[0] for r in rows]
        for item, seq in zip(items, seqs, strict=True):
            if isinstance(item, Result):
                item.seq = seq
        return seqs

    @staticmethod
    def _rollback(db: sqlite3.Connection) -> None:
        if db.in_transaction:
            try:
                db.execute("ROLLBACK")
            except sqlite3.Error as exc:  # the original error is the one to report
                log.error("outbox rollback failed: %s", exc)

    def ack(self, result_id: str) -> bool:
        """Remove an acknowledged result. Returns False when it was not pending.

        :param result_id: the result's ``id``.
        """
        return self.ack_many([result_id]) == 1

    def ack_many(self, result_ids: Iterable[str]) -> int:
        """Remove several acknowledged results in one transaction; returns how many were pending.

        :param result_ids: result ids (unknown ones are ignored: a duplicate PUBACK).
        """
        ids = list(result_ids)
        if not ids:
            return 0
        with self._lock:
            db = self._conn()
            try:
                # Removing acknowledged rows needs no fsync of its own: a delete lost to
                # a power cut only means a result is published again (receivers
                # de-duplicate), and the next put()'s FULL commit syncs the WAL with it.
                # NORMAL keeps the WAL consistent (SQLite: WAL + NORMAL never corrupts).
                if self.synchronous != "NORMAL":
                    db.execute("PRAGMA synchronous=NORMAL")
                db.execute("BEGIN IMMEDIATE")
                removed = 0
                for rid in ids:
                    removed += db.execute("DELETE FROM results WHERE id = ?", (rid,)).rowcount
                db.execute("COMMIT")
            except sqlite3.Error as exc:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                # Not fatal: the rows stay and are published again (receivers de-duplicate).
                log.error("outbox %s: cannot remove acknowledged results: %s", self.path, exc)
                return 0
            finally:
                if self.synchronous != "NORMAL":
                    try:
                        db.execute(f"PRAGMA synchronous={self.synchronous}")
                    except sqlite3.Error as exc:  # never raise into the publisher's pump
                        log.error(
                            "outbox %s: cannot restore synchronous=%s: %s",
                            self.path, self.synchronous, exc,
                        )  # fmt: skip
            self._depth -= removed
            return removed

    def dead_letter(self, result_id: str, reason: str) -> bool:
        """Move a pending result the broker will not take to the dead-letter table.

        One transaction: the row leaves ``results`` and enters ``dead_letters`` (with the
        reason and the time) together, so it is neither lost nor published again, and it
        no longer holds back the results after it. The table survives restarts.

        :param result_id: the result's ``id``.
        :param reason: why it cannot be delivered (kept with it).
        :returns: True when it was moved; False when it was not pending or the move
            failed (logged; the row stays and is tried again).
        """
        import time

        with self._lock:
            db = self._conn()
            try:
                db.execute("BEGIN IMMEDIATE")
                moved = db.execute(
                    "INSERT OR REPLACE INTO dead_letters (seq, id, payload, reason, moved_at) "
                    "SELECT seq, id, payload, ?, ? FROM results WHERE id = ?",
                    (str(reason)[:1000], time.time(), result_id),
                ).rowcount
                db.execute("DELETE FROM results WHERE id = ?", (result_id,))
                db.execute("COMMIT")
            except sqlite3.Error as exc:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                log.error(
                    "outbox %s: cannot move %s to the dead letters: %s", self.path, result_id, exc
                )
                return False
            self._depth -= moved
            self._dead += moved
            return moved == 1

    def dead_letter_count(self) -> int:
        """Number of results in the dead-letter table."""
        with self._lock:
            return self._dead

    def dead_letters(self, n: int = 100) -> list[tuple[OutboxItem, str]]:
        """Up to ``n`` dead-lettered results with their reasons, oldest first.

        :param n: how many at most.
        """
        with self._lock:
            rows = (
                self._conn()
                .execute(
                    "SELECT seq, id, payload, reason FROM dead_letters ORDER BY seq LIMIT ?",
                    (int(n),),
                )
                .fetchall()
            )
        return [(OutboxItem(int(s), str(i), str(p)), str(r)) for s, i, p, r in rows]

    # -- reading ---------------------------------------------------------------------
    def pending(self, n: int = 100, after_seq: int = 0) -> list[OutboxItem]:
        """Up to ``n`` unacknowledged results with ``seq > after_seq``, in seq order.

        :param n: how many at most.
        :param after_seq: continue after this sequence number (0: from the oldest).
        """
        with self._lock:
            rows = (
                self._conn()
                .execute(
                    "SELECT seq, id, payload FROM results WHERE seq > ? ORDER BY seq LIMIT ?",
                    (int(after_seq), int(n)),
                )
                .fetchall()
            )
        return [OutboxItem(int(s), str(i), str(p)) for s, i, p in rows]

    def depth(self) -> int:
        """Number of unacknowledged results."""
        with self._lock:
            return self._depth

    @property
    def full(self) -> bool:
        """True when depth has reached the limit: the station must stop taking parts."""
        return self.depth() >= self.limit

    @property
    def last_seq(self) -> int:
        """The highest sequence number committed so far (0 for a new outbox)."""
        with self._lock:
            return self._last_seq

    # -- lifecycle -------------------------------------------------------------------
    def close(self) -> None:
        """Close the database and release the lock (idempotent)."""
        with self._lock:
            if self._db is not None:
                try:
                    # Fold the WAL back so the file is self-contained when copied off a station.
                    self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                except sqlite3.Error:
                    pass
                self._db.close()
                self._db = None
            self._release_lock()

    def __enter__(self) -> Outbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Outbox({str(self.path)!r}, depth={self._depth}, limit={self.limit})"
