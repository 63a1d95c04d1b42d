"""The SQLite outbox: order, acknowledgement, restart, limits, threads, and SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inspector.errors import StationError
from inspector.station.outbox import Outbox
from inspector.station.result import validate_result

REPO = Path(__file__).resolve().parents[2]


def test_put_pending_ack_in_order(tmp_path, make_result):
    with Outbox(tmp_path / "o.sqlite", limit=10) as ob:
        results = [make_result(i) for i in range(5)]
        seqs = [ob.put(r) for r in results]
        assert seqs == [1, 2, 3, 4, 5]
        assert [r.seq for r in results] == seqs
        items = ob.pending(10)
        assert [i.id for i in items] == [r.id for r in results]
        for item in items:
            doc = json.loads(item.payload)
            assert doc["seq"] == item.seq
            validate_result(doc)
        assert ob.ack(results[1].id) and not ob.ack(results[1].id)
        assert ob.depth() == 4
        assert [i.seq for i in ob.pending(10)] == [1, 3, 4, 5]
        assert [i.seq for i in ob.pending(2, after_seq=1)] == [3, 4]
        assert ob.ack_many([results[0].id, "unknown", results[4].id]) == 2
        assert [i.seq for i in ob.pending()] == [3, 4]


def test_restart_keeps_pending_and_seq_never_goes_back(tmp_path, make_result):
    path = tmp_path / "o.sqlite"
    ob = Outbox(path)
    rs = [make_result(i) for i in range(6)]
    for r in rs:
        ob.put(r)
    ob.ack_many([rs[0].id, rs[2].id])
    ob.close()
    ob = Outbox(path)
    assert ob.depth() == 4
    assert [i.id for i in ob.pending()] == [rs[i].id for i in (1, 3, 4, 5)]
    ob.ack_many([i.id for i in ob.pending()])
    ob.close()
    ob = Outbox(path)  # empty, but the sequence continues
    assert ob.depth() == 0 and ob.last_seq == 6
    assert ob.put(make_result(99)) == 7
    ob.close()


def test_full_is_a_signal_not_a_refusal(tmp_path, make_result):
    with Outbox(tmp_path / "o.sqlite", limit=3) as ob:
        for i in range(3):
            assert not ob.full
            ob.put(make_result(i))
        assert ob.full
        ob.put(make_result(3))  # a decided part is never dropped
        assert ob.depth() == 4 and ob.full
        ob.ack_many([i.id for i in ob.pending(2)])
        assert not ob.full


def test_accepts_dicts_and_json_text_and_rejects_duplicates(tmp_path, make_result):
    with Outbox(tmp_path / "o.sqlite") as ob:
        r = make_result(0)
        assert ob.put(r.to_json()) == 1
        with pytest.raises(ValueError, match="already in the outbox"):
            ob.put(r.to_dict())
        with pytest.raises(ValueError, match="id"):
            ob.put({"schema": "x"})
        assert ob.put(make_result(1).to_dict()) == 2
        assert ob.depth() == 2


def test_one_process_at_a_time_and_clear_errors(tmp_path, make_result):
    path = tmp_path / "o.sqlite"
    with Outbox(path):
        with pytest.raises(StationError, match="in use by another process"):
            Outbox(path)
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StationError, match="not a usable outbox"):
        Outbox(junk)
    with pytest.raises(StationError, match="limit"):
        Outbox(tmp_path / "x.sqlite", limit=0)
    ob = Outbox(tmp_path / "closed.sqlite")
    ob.close()
    with pytest.raises(StationError, match="closed"):
        ob.put(make_result(0))


def test_wal_and_synchronous_settings(tmp_path):
    import sqlite3

    with Outbox(tmp_path / "o.sqlite") as ob:
        db = ob._conn()
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert db.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    with Outbox(tmp_path / "n.sqlite", synchronous="normal") as ob:
        assert ob._conn().execute("PRAGMA synchronous").fetchone()[0] == 1
    with pytest.raises(StationError):
        Outbox(tmp_path / "bad.sqlite", synchronous="OFF")
    assert sqlite3.sqlite_version_info >= (3, 7, 0)


def test_threads_put_and_ack_concurrently(tmp_path, make_result):
    ob = Outbox(tmp_path / "o.sqlite", synchronous="NORMAL")
    n_threads, per = 4, 100
    acked: list[str] = []
    done = threading.Event()

    def producer(t: int) -> None:
        for i in range(per):
            ob.put(make_result(t * 1000 + i))

    def acker() -> None:
        # What the publisher's thread does: ack whatever is oldest, while puts go on.
        while not done.is_set() or ob.depth():
            items = ob.pending(7)
            acked.extend(i.id for i in items)
            ob.ack_many([i.id for i in items])

    threads = [threading.Thread(target=producer, args=(t,)) for t in range(n_threads)]
    a = threading.Thread(target=acker)
    a.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    done.set()
    a.join(30)
    assert ob.depth() == 0
    assert len(acked) == len(set(acked)) == n_threads * per
    assert ob.last_seq == n_threads * per
    ob.close()


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=st.lists(st.one_of(st.just("put"), st.integers(0, 20), st.just("reopen")), max_size=30))
def test_pending_is_always_the_unacknowledged_rows_in_commit_order(tmp_path_factory, ops):
    from tests.integration._mqtt_harness import sample_result

    path = tmp_path_factory.mktemp("prop") / "o.sqlite"
    ob = Outbox(path, synchronous="NORMAL")
    model: list[tuple[int, str]] = []  # (seq, id) not yet acknowledged
    last = 0
    for k, op in enumerate(ops):
        if op == "put":
            r = sample_result(k)
            last = ob.put(r)
            model.append((last, r.id))
        elif op == "reopen":
            ob.close()
            ob = Outbox(path, synchronous="NORMAL")
        elif model:
            seq, rid = model.pop(op % len(model))
            assert ob.ack(rid)
        assert [(i.seq, i.id) for i in ob.pending(1000)] == model
        assert ob.depth() == len(model)
        assert ob.last_seq == last
    assert all(a[0] < b[0] for a, b in zip(model, model[1:]))
    ob.close()


def test_nothing_committed_is_lost_on_sigkill(tmp_path):
    path = tmp_path / "o.sqlite"
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("_mqtt_station_proc.py")), str(path),
         "0", "0", "100000"],
        stdout=subprocess.PIPE, text=True, env=env, cwd=REPO,
    )  # fmt: skip
    committed: list[tuple[int, str]] = []
    for line in proc.stdout:
        _, seq, rid = line.split()
        committed.append((int(seq), rid))
        if len(committed) >= 300:
            break
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    proc.stdout.close()
    with Outbox(path) as ob:  # the kernel dropped the dead process's lock
        rows = [(i.seq, i.id) for i in ob.pending(100_000)]
        # Everything put() returned for is there, in order; at most the commit that was
        # under way when the signal came is there too (or not).
        assert rows[: len(committed)] == committed
        assert [s for s, _ in rows] == list(range(1, len(rows) + 1))
        for item in ob.pending(5):
            validate_result(item.payload)
