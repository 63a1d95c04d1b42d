"""The station's footage recorder: keep the frames worth retraining on, within a size limit.

A station folder (imported by ``footage import SRC --format station``)::

    FOOTAGE/
      footage.json                        # {"kind": "inspector.station-footage/1"}
      frames/ab/<frame_id>.png            # the frame, lossless 8-bit gray PNG
      frames/ab/<frame_id>.result.json    # the Result document that judged it

``frame_id`` is the store's content hash (:func:`inspector.footage.store.frame_hash`),
and the PNG sits where the store would put it, so the station's folder is the
store's frame layout without the index. Each file is written to a temporary
name and renamed, the PNG before its result, so a reader never sees half a file
and a result always has its frame. What is kept: every defect verdict, every
part below the confidence threshold, every error result that has a frame, and
one ok part in ``keep_ok_every``. Over ``max_bytes`` the oldest ok frames are
deleted first, then (with a warning) the oldest others; the frame just written
is never deleted.

With ``background=True`` (what the station uses) :meth:`FootageWriter.record`
decides, hashes and returns the reference at once and a writer thread encodes and
writes the files, so a PNG encode and two fsyncs per kept frame do not stall the
inspection loop. The queue is bounded (``queue_frames``): when the disk cannot keep
up, :meth:`record` waits for room rather than dropping a frame, so the station slows
down to what the disk sustains. :meth:`close` writes everything still queued. A
process killed outright loses the queued frames (at most ``queue_frames``); their
results were published with a reference the folder then lacks, which the importer
reports as a missing frame.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import threading
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from inspector.errors import FootageError
from inspector.files import write_atomic
from inspector.footage.store import encode_png, frame_hash, frame_relpath
from inspector.imageio import to_gray

log = logging.getLogger(__name__)

KIND = "inspector.station-footage/1"
MARKER = "footage.json"
RESULT_SUFFIX = ".result.json"


class FootageWriter:
    """Record station frames with their Result JSON.

    :param path: the station's footage folder (created).
    :param keep_ok_every: keep one ok part in this many (1: all, 0: none).
    :param low_confidence: keep every part whose confidence is below this.
    :param max_bytes: size limit of the frames and results in bytes (None: no limit).
    :param keep_errors: keep error results that carry a frame.
    :param background: encode and write in a writer thread (see the module docstring).
    :param queue_frames: frames the background queue holds before :meth:`record` waits.
    :raises FootageError: bad settings or a folder that cannot be created.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        keep_ok_every: int = 10,
        low_confidence: float = 0.6,
        max_bytes: int | None = 2 * 1024**3,
        keep_errors: bool = True,
        background: bool = False,
        queue_frames: int = 32,
    ) -> None:
        if keep_ok_every < 0:
            raise FootageError(f"keep_ok_every must be >= 0, got {keep_ok_every}")
        if not 0.0 <= low_confidence <= 1.0:
            raise FootageError(f"low_confidence must be 0..1, got {low_confidence}")
        if max_bytes is not None and max_bytes < 1:
            raise FootageError(f"max_bytes must be positive, got {max_bytes}")
        if queue_frames < 1:
            raise FootageError(f"queue_frames must be >= 1, got {queue_frames}")
        self.root = Path(path).expanduser()
        self.keep_ok_every = int(keep_ok_every)
        self.low_confidence = float(low_confidence)
        self.max_bytes = max_bytes
        self.keep_errors = bool(keep_errors)
        self._lock = threading.Lock()
        self._ok_seen = 0
        # frame_id -> (bytes on disk, is_ok); the deques hold ids oldest first.
        self._entries: dict[str, tuple[int, bool]] = {}
        self._ok: deque[str] = deque()
        self._other: deque[str] = deque()
        self.total_bytes = 0
        self.written = 0
        self.evicted = 0
        #: frames that could not be written (logged; the result is kept regardless)
        self.errors = 0
        self._queue: queue.Queue[tuple[str, np.ndarray, dict[str, Any]] | None] | None = None
        self._thread: threading.Thread | None = None
        try:
            (self.root / "frames").mkdir(parents=True, exist_ok=True)
            marker = self.root / MARKER
            if not marker.is_file():
                write_atomic(marker, json.dumps({"kind": KIND}).encode())
        except OSError as exc:
            raise FootageError(f"footage folder {self.root}: {exc.strerror or exc}") from None
        self._scan()
        if background:
            self._queue = queue.Queue(maxsize=int(queue_frames))
            self._thread = threading.Thread(target=self._drain, name="footage-writer", daemon=True)
            self._thread.start()

    def _scan(self) -> None:
        """Rebuild the size accounting from what an earlier run left (oldest first)."""
        found = []
        for res in (self.root / "frames").glob("*/*" + RESULT_SUFFIX):
            fid = res.name[: -len(RESULT_SUFFIX)]
            png = res.with_name(fid + ".png")
            try:
                doc = json.loads(res.read_text(encoding="utf-8"))
                size = res.stat().st_size + (png.stat().st_size if png.exists() else 0)
                found.append((res.stat().st_mtime, fid, size, self._evict_first(doc)))
            except (OSError, ValueError):
                continue  # a damaged result is the importer's to report
        for _, fid, size, ok in sorted(found):
            self._track(fid, size, ok)

    def _track(self, fid: str, size: int, ok: bool) -> None:
        self._entries[fid] = (size, ok)
        (self._ok if ok else self._other).append(fid)
        self.total_bytes += size

    def _untrack(self, fid: str) -> None:
        size, ok = self._entries.pop(fid)
        q = self._ok if ok else self._other
        try:
            q.remove(fid)
        except ValueError:  # pragma: no cover - kept in step with _entries
            pass
        self.total_bytes -= size

    def _evict_first(self, doc: Mapping[str, Any]) -> bool:
        """Confident ok frames go first when the folder is full (the 1-in-N samples)."""
        conf = doc.get("confidence")
        confident = conf is None or float(conf) >= self.low_confidence
        return doc.get("verdict") == "ok" and doc.get("error") is None and confident

    def keep_reason(self, result: Mapping[str, Any]) -> str | None:
        """Why a part's frame is kept (``defect``, ``low-confidence``, ``error``, ``ok-sample``),
        or None when it is not. Counts ok parts, so call it once per part.

        :param result: the Result document (``Result.to_dict()``).
        """
        if result.get("error") is not None or result.get("verdict") is None:
            return "error" if self.keep_errors else None
        conf = result.get("confidence")
        if result.get("verdict") != "ok":
            return "defect"
        if conf is not None and float(conf) < self.low_confidence:
            return "low-confidence"
        self._ok_seen += 1
        if self.keep_ok_every and (self._ok_seen - 1) % self.keep_ok_every == 0:
            return "ok-sample"
        return None

    def record(self, image: np.ndarray | None, result: Mapping[str, Any]) -> str | None:
        """Keep the part's frame when :meth:`keep_reason` says so.

        :param image: the frame (gray or BGR uint8), or None when there is none.
        :param result: its Result document; the copy written carries the reference.
        :returns: the footage reference (``frames/ab/<frame_id>.png``, relative to the
            folder) for the Result's ``footage`` field, or None when nothing was kept.
        """
        reason = self.keep_reason(result)
        if reason is None or image is None:
            return None
        gray = to_gray(image, contiguous=True)
        fid = frame_hash(gray)
        ref = frame_relpath(fid)
        doc = dict(result)
        doc["footage"] = ref
        if self._queue is None:
            self._write(fid, gray, doc)
        else:
            if self._thread is None:
                raise FootageError(f"footage writer {self.root} is closed")
            # A copy: the camera may reuse its buffer for the next frame.
            self._queue.put((fid, np.array(gray, copy=True), doc))
        return ref

    def _write(self, fid: str, gray: np.ndarray, doc: dict[str, Any]) -> None:
        ref = frame_relpath(fid)
        png = encode_png(gray)
        body = json.dumps(doc, separators=(",", ":")).encode()
        with self._lock:
            if fid in self._entries:
                self._untrack(fid)
            path = self.root / ref
            write_atomic(path, png)
            write_atomic(path.with_name(fid + RESULT_SUFFIX), body)
            self._track(fid, len(png) + len(body), self._evict_first(doc))
            self.written += 1
            self._enforce(keep=fid)

    def _drain(self) -> None:
        q = self._queue
        if q is None:  # pragma: no cover - only started with a queue
            return
        while True:
            item = q.get()
            try:
                if item is None:
                    return
                try:
                    self._write(*item)
                except Exception as exc:  # a full disk costs the frame, never the station
                    self.errors += 1
                    log.error("footage %s: frame %s not written: %s", self.root, item[0], exc)
            finally:
                q.task_done()

    def pending(self) -> int:
        """Frames queued for the writer thread (0 without ``background``)."""
        return self._queue.qsize() if self._queue is not None else 0

    def flush(self) -> None:
        """Wait until every queued frame is written."""
        if self._queue is not None and self._thread is not None:
            self._queue.join()

    def close(self) -> None:
        """Write what is queued and stop the writer thread (idempotent)."""
        if self._queue is not None and self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            self._thread = None

    def _enforce(self, keep: str) -> None:
        if self.max_bytes is None:
            return
        while self.total_bytes > self.max_bytes:
            victim = next((f for f in self._ok if f != keep), None)
            if victim is None:
                victim = next((f for f in self._other if f != keep), None)
                if victim is None:
                    return  # only the frame just written is left
                log.warning(
                    "footage %s is over %d bytes with no ok frames left: deleting the oldest "
                    "kept defect/low-confidence frame %s",
                    self.root,
                    self.max_bytes,
                    victim,
                )
            self._delete(victim)

    def _delete(self, fid: str) -> None:
        png = self.root / frame_relpath(fid)
        # The result goes first: a frame without its result is ignored by the importer,
        # a result without its frame would be reported as damaged.
        for p in (png.with_name(fid + RESULT_SUFFIX), png):
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass
        self._untrack(fid)
        self.evicted += 1
