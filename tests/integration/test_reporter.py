"""The reporter's group commit: one transaction per batch, order, retries, nothing dropped."""

from __future__ import annotations

import logging
import sqlite3
import threading

import pytest

from inspector.errors import StationError
from inspector.station.outbox import Outbox
from inspector.station.reporter import Reporter
from tests.integration._mqtt_harness import wait_until


def _ids_on_disk(path) -> list[str]:
    """What another connection sees: only committed rows."""
    with sqlite3.connect(path) as db:
        return [r[0] for r in db.execute("SELECT id FROM results ORDER BY seq")]


class FlakyOutbox(Outbox):
    """An outbox whose commits fail ``failures`` times, and can be held at a gate."""

    def __init__(self, *args, failures: int = 0, **kwargs):
        super().__init__(*args, **kwargs)
        self.failures = failures
        self.gate = threading.Event()
        self.gate.set()
        self.batches: list[int] = []

    def put_many(self, results):
        items = list(results)
        self.gate.wait(30)
        if self.failures:
            self.failures -= 1
            raise StationError("disk I/O error (simulated)")
        self.batches.append(len(items))
        return super().put_many(items)


def test_put_many_is_one_transaction_and_all_or_nothing(tmp_path, make_result):
    with Outbox(tmp_path / "o.sqlite") as ob:
        rs = [make_result(i) for i in range(4)]
        assert ob.put_many(rs[:3]) == [1, 2, 3]
        assert [r.seq for r in rs[:3]] == [1, 2, 3]
        with pytest.raises(ValueError, match=f"result id {rs[1].id} is already"):
            ob.put_many([rs[3], rs[1]])
        assert ob.depth() == 3 and ob.last_seq == 3  # rs[3] was not committed either
        assert _ids_on_disk(tmp_path / "o.sqlite") == [r.id for r in rs[:3]]
        assert ob.put_many([rs[3]]) == [4] and ob.put_many([]) == []


def test_background_commits_in_order_and_reports_only_durable_results(tmp_path, make_result):
    path = tmp_path / "o.sqlite"
    seen: list[tuple[str, bool, int | None]] = []

    def on_committed(r):
        seen.append((r.id, r.id in _ids_on_disk(path), r.seq))

    rs = [make_result(i) for i in range(200)]
    rep = Reporter(Outbox(path), background=True, on_committed=on_committed)
    for r in rs:
        assert rep.report(r) is None
    assert rep.drain(30)
    assert [s[0] for s in seen] == [r.id for r in rs]
    assert all(durable for _, durable, _ in seen)
    assert [s[2] for s in seen] == list(range(1, 201))
    assert rep.close(flush_timeout=1.0)
    assert _ids_on_disk(path) == [r.id for r in rs]
    with pytest.raises(StationError, match="closed"):
        rep.report(make_result(999))


def test_queued_results_count_against_the_limits(tmp_path, make_result):
    box = FlakyOutbox(tmp_path / "o.sqlite", limit=1000)
    box.gate.clear()  # the disk stalls: nothing commits
    rep = Reporter(box, background=True, queue_limit=3)
    try:
        for i in range(3):
            assert rep.accepting
            rep.report(make_result(i))
        assert not rep.accepting and rep.queued == 3
        assert rep.status().outbox_depth == 3  # the status line counts them too
        box.gate.set()
        assert rep.drain(10) and rep.accepting and box.depth() == 3
    finally:
        box.gate.set()
        rep.close(flush_timeout=1.0)
    small = Outbox(tmp_path / "small.sqlite", limit=2)
    rep = Reporter(small, background=True)
    rep.report(make_result(10))
    rep.report(make_result(11))
    assert not rep.accepting  # the outbox limit counts queued results as rows
    rep.close(flush_timeout=5.0)


def test_failed_commits_are_retried_in_order_and_counted(tmp_path, make_result, caplog):
    box = FlakyOutbox(tmp_path / "o.sqlite", failures=2)
    rep = Reporter(box, background=True)
    rs = [make_result(i) for i in range(20)]
    with caplog.at_level(logging.ERROR, logger="inspector.station.reporter"):
        for r in rs:
            rep.report(r)
        assert rep.drain(30)
    assert rep.commit_errors == 2
    assert "disk I/O error (simulated)" in caplog.text
    assert rep.close(flush_timeout=1.0)
    assert _ids_on_disk(tmp_path / "o.sqlite") == [r.id for r in rs]
    assert max(box.batches) > 1  # results that queued during the outage went in together


def test_a_disk_fault_after_a_repeated_id_keeps_what_was_committed(tmp_path, make_result):
    """A batch with a repeated id is committed one by one; when the disk fails part-way,
    the results already durable still count as committed (results log) and the rest is
    retried, so every result is committed and reported once."""
    path = tmp_path / "o.sqlite"

    class FailsOnce(Outbox):
        def __init__(self, *args, fail_call: int, **kwargs):
            super().__init__(*args, **kwargs)
            self.calls, self.fail_call = 0, fail_call
            self.gate = threading.Event()

        def put_many(self, results):
            items = list(results)
            self.calls += 1
            self.gate.wait(30)
            if self.calls == self.fail_call:
                raise StationError("disk I/O error (simulated)")
            return super().put_many(items)

    # Calls: 1 [x]; 2 [a, b, a again] refused (a twice); 3 [a]; 4 [b] fails on the disk.
    box = FailsOnce(path, fail_call=4)
    seen: list[str] = []
    rep = Reporter(box, background=True, on_committed=lambda r: seen.append(r.id))
    x, a, b = make_result(0), make_result(1), make_result(2)
    rep.report(x)
    wait_until(lambda: box.calls >= 1, 10, "the committer to take x alone")
    for r in (a, b, a):  # a caller reporting one result twice
        rep.report(r)
    box.gate.set()
    assert rep.drain(30)
    assert seen == [x.id, a.id, b.id]
    assert rep.commit_errors == 1
    assert rep.close(flush_timeout=1.0)
    assert _ids_on_disk(path) == [x.id, a.id, b.id]


def test_a_disk_that_never_recovers_names_the_lost_results(tmp_path, make_result, caplog):
    box = FlakyOutbox(tmp_path / "o.sqlite", failures=10**9)
    rep = Reporter(box, background=True)
    rs = [make_result(i) for i in range(3)]
    for r in rs:
        rep.report(r)
    wait_until(lambda: rep.commit_errors >= 1, 10, "a failed commit")
    assert not rep.accepting or rep.queued == 3
    with caplog.at_level(logging.ERROR, logger="inspector.station.reporter"):
        assert rep.close(flush_timeout=0.3) is False
    assert "3 results could not be committed and are lost" in caplog.text
    assert all(r.id in caplog.text for r in rs)


def test_synchronous_reporter_commits_before_returning(tmp_path, make_result):
    path = tmp_path / "o.sqlite"
    calls = []
    rep = Reporter(Outbox(path), on_committed=calls.append)
    r = make_result(0)
    assert rep.report(r) == 1 and r.seq == 1 and calls == [r]
    assert _ids_on_disk(path) == [r.id]
    assert rep.close()
