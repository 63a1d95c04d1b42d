"""What the station calls once per part: commit the result to the outbox, then publish it.

Two ways to commit:

* synchronous (``background=False``): :meth:`Reporter.report` returns when the result is
  durable in the outbox, and publishes it on the calling thread;
* background (``background=True``, what the station uses): ``report`` queues the result
  and returns at once; a committer thread commits what has queued in one transaction
  (group commit: one fsync for the batch), then publishes it. The fsync of a
  ``synchronous=FULL`` outbox (0.1 to several ms) is then off the station's critical
  path, overlapping the next part's inspection.

Either way a result is committed before it is published, and a part counts as
*committed* (``on_committed`` is called, e.g. for the station's results log) only once
its row is durable. A process killed with results still queued loses those, exactly
as it loses the part it was inspecting; nothing that was committed is ever lost. The
queue is bounded by :attr:`Reporter.accepting`: the station takes no new part while
``queue_limit`` results wait, or while the outbox is full.

A commit that fails (disk full, I/O error) is logged, counted in
:attr:`Reporter.commit_errors` and retried with back-off; the results stay queued
meanwhile, and :attr:`Reporter.accepting` is false until a commit succeeds again, so
the station stops taking parts instead of piling up results it cannot keep. What is
still uncommitted at :meth:`Reporter.close` is named in :attr:`Reporter.lost`.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import threading
import time
from collections.abc import Callable

from inspector.errors import StationError
from inspector.station.mqtt import LinkStatus, Publisher
from inspector.station.outbox import Outbox
from inspector.station.result import Result

log = logging.getLogger(__name__)

#: Results committed together in one transaction, at most.
COMMIT_BATCH = 64


class Reporter:
    """Commit, then publish.

    :param outbox: the durable outbox.
    :param publisher: a started :class:`Publisher` on the same outbox, or None when
        another process drains the outbox.
    :param background: commit on a committer thread (see the module docstring).
    :param queue_limit: with ``background``, results waiting for their commit at most
        before :attr:`accepting` turns false.
    :param on_committed: called with each result once it is durable (its ``seq`` set),
        on the committing thread, in commit order. An exception there is logged.
    """

    def __init__(
        self,
        outbox: Outbox,
        publisher: Publisher | None = None,
        *,
        background: bool = False,
        queue_limit: int = 256,
        on_committed: Callable[[Result], None] | None = None,
    ) -> None:
        self.outbox = outbox
        self.publisher = publisher
        self.background = bool(background)
        self.queue_limit = max(1, int(queue_limit))
        self.on_committed = on_committed
        #: Failed commit attempts so far (each one logged).
        self.commit_errors = 0
        #: When the commits started failing (monotonic), None while they succeed.
        self.failing_since: float | None = None
        #: The latest commit error, None while commits succeed.
        self.last_commit_error: str | None = None
        #: Ids of the results given up at close because they could not be committed.
        self.lost: list[str] = []
        self._warned_full = False
        self._closed = False
        self._cond = threading.Condition()
        self._queue: collections.deque[Result] = collections.deque()
        self._busy = 0  # results taken off the queue, not yet committed
        self._stop = False  # set by close(): what is still queued then is given up
        self._thread: threading.Thread | None = None
        if self.background:
            self._thread = threading.Thread(
                target=self._run, name="inspector-outbox-commit", daemon=True
            )
            self._thread.start()

    # -- what the station calls ------------------------------------------------------
    def report(self, result: Result) -> int | None:
        """Hand over one result.

        :returns: its seq when committing synchronously (durable on return, ``result.seq``
            set); None with ``background`` (``result.seq`` is set once it is committed).
        :raises StationError: synchronous: the outbox cannot commit (disk full, I/O
            error); background: the reporter is closed.
        """
        if not self.background:
            try:
                seq = self.outbox.put(result)
            except StationError as exc:
                self.commit_errors += 1
                self.last_commit_error = str(exc)
                if self.failing_since is None:
                    self.failing_since = time.monotonic()
                raise
            self.failing_since = self.last_commit_error = None
            self._committed([result])
            return seq
        with self._cond:
            if self._stop:
                raise StationError("the reporter is closed; the result was not committed")
            self._queue.append(result)
            self._cond.notify_all()
        return None

    @property
    def queued(self) -> int:
        """Results handed over and not yet committed."""
        with self._cond:
            return len(self._queue) + self._busy

    @property
    def accepting(self) -> bool:
        """False while the outbox is full, commits fail, or too many results wait."""
        if self.failing_since is not None:
            return False  # the disk refuses: no new part until a commit goes through
        queued = self.queued  # counted against the outbox limit too: they will be rows
        return queued < self.queue_limit and self.outbox.depth() + queued < self.outbox.limit

    def status(self) -> LinkStatus:
        """Depth (committed and queued), connection and last error for the status line."""
        queued = self.queued
        if self.publisher is not None:
            st = self.publisher.status()
        else:
            depth = self.outbox.depth()
            st = LinkStatus(
                connected=False, outbox_depth=depth, outbox_full=depth >= self.outbox.limit,
                last_error=None, published=0, acknowledged=0, republished=0, connects=0,
                errors=0, triggers=0, bad_triggers=0,
                dead_letters=self.outbox.dead_letter_count(),
            )  # fmt: skip
        if queued:
            st = dataclasses.replace(st, outbox_depth=st.outbox_depth + queued)
        return st

    def drain(self, timeout: float = 10.0) -> bool:
        """Wait until every handed-over result is committed (or ``timeout`` passes).

        :returns: True when nothing waits for its commit.
        """
        deadline = time.monotonic() + max(0.0, timeout)
        with self._cond:
            while self._queue or self._busy:
                left = deadline - time.monotonic()
                if left <= 0 or self._thread is None or not self._thread.is_alive():
                    return False
                self._cond.wait(min(left, 0.2))
        return True

    def close(self, flush_timeout: float = 5.0) -> bool:
        """Commit what is queued, flush (up to ``flush_timeout``), publish offline, close.

        Results that still cannot be committed after ``flush_timeout`` (a broken disk) are
        logged at ERROR with their ids: they are the only results a station can lose.

        :returns: True when everything was committed and (with a publisher) acknowledged.
        """
        if self._closed:
            return True
        self._closed = True
        committed = self.drain(flush_timeout) if self.background else True
        with self._cond:
            self._stop = True
            lost = list(self._queue)
            self._queue.clear()
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(10.0)
        if lost:
            committed = False
            self.lost = [r.id for r in lost]
            log.error(
                "outbox %s: %d results could not be committed and are lost: %s",
                self.outbox.path, len(lost), ", ".join(r.id for r in lost),
            )  # fmt: skip
        ok = committed  # without a publisher, committed is all there is to do here
        if self.publisher is not None:
            ok = self.publisher.flush(flush_timeout) and committed
            self.publisher.close()
        self.outbox.close()
        return ok

    # -- committing ------------------------------------------------------------------
    def _committed(self, results: list[Result]) -> None:
        if self.publisher is not None:
            self.publisher.notify()
        full = self.outbox.full
        if full and not self._warned_full:
            log.error(
                "outbox full (%d >= %d): stop taking parts until results are acknowledged",
                self.outbox.depth(), self.outbox.limit,
            )  # fmt: skip
        self._warned_full = full
        if self.on_committed is not None:
            for r in results:
                try:
                    self.on_committed(r)
                except Exception as exc:  # the result is committed; only the callback failed
                    log.error("after committing result %s: %s", r.id, exc)

    def _run(self) -> None:
        delay = 0.1
        while True:
            with self._cond:
                while not self._queue and not self._stop:
                    self._cond.wait()
                if self._stop:
                    return  # close() has drained what it could and taken the rest
                batch = [self._queue.popleft() for _ in range(min(COMMIT_BATCH, len(self._queue)))]
                self._busy = len(batch)
            try:
                done = self._commit(batch)
            except StationError as exc:
                with self._cond:
                    self._retry_later(batch, exc)  # and wait before retrying
                    self._busy = 0
                    self._cond.notify_all()
                    if self._stop:
                        return
                    self._cond.wait(delay)
                    if self._stop:
                        return
                delay = min(5.0, delay * 2)
                continue
            delay = 0.1
            if done and self.failing_since is not None:
                log.warning("outbox commits succeed again")
                self.failing_since = self.last_commit_error = None
            self._committed(done)
            with self._cond:
                self._busy = 0
                self._cond.notify_all()

    def _retry_later(self, results: list[Result], exc: StationError) -> None:
        """Count and log a failed commit; put ``results`` back at the front of the queue,
        in order, for the committer's next try. The caller holds ``self._cond``."""
        self.commit_errors += 1
        self.last_commit_error = str(exc)
        if self.failing_since is None:
            self.failing_since = time.monotonic()
        log.error("outbox commit failed (%d results wait; retrying): %s", len(results), exc)
        self._queue.extendleft(reversed(results))

    def _commit(self, batch: list[Result]) -> list[Result]:
        """Commit ``batch`` in one transaction; returns the results now durable.

        When an id in the batch is already pending, the results are committed one by
        one and the repeated one is left out. Should the disk fail part-way through
        that, the results committed so far are returned (so they count as committed)
        and the rest go back to the front of the queue, to be retried.

        :raises StationError: the commit failed before any result of the batch was durable.
        """
        try:
            self.outbox.put_many(batch)
            return batch
        except ValueError:
            pass  # an id already pending (a caller reported one result twice)
        done = []
        for i, r in enumerate(batch):
            try:
                self.outbox.put(r)
            except ValueError as exc:
                log.error("result %s not committed twice: %s", r.id, exc)
                continue
            except StationError as exc:
                if not done:
                    raise
                with self._cond:
                    self._retry_later(batch[i:], exc)
                    self._busy = len(done)
                break
            done.append(r)
        return done


__all__ = ["COMMIT_BATCH", "Reporter"]
