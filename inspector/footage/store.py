"""The footage store: every frame once (by content hash), its label, truth and provenance.

Layout of a store folder (see docs/footage.md)::

    STORE/
      index.sqlite                     # the index (SQLite, WAL journal)
      frames/ab/<frame_id>.png         # the frame, lossless 8-bit gray PNG
      frames/ab/<frame_id>.mask.png    # its defect mask (255 on defects), when it has one

``frame_id`` is the sha256 of the frame's decoded gray pixels (see
:func:`frame_hash`), so the same picture imported twice, from a JPEG or from
the PNG the station wrote, is one frame. The split is a function of that hash
alone (:func:`split_of`): ``heldout`` when the first byte is below the store's
threshold (fixed when the store is created, default 51/256, about 20 %), ``val``
in the band just above it (default 26/256, about 10 %), ``train`` otherwise.
Training never reads a held-out frame. A store made before the val split gets
it the first time it is opened (only ``train`` frames move to ``val``).

The records and pure helpers live in :mod:`inspector.footage.records`.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from inspector.errors import FootageError
from inspector.footage.reading import DEFAULT_LOW_CONFIDENCE, StoreReading
from inspector.footage.records import (
    DEFAULT_HELDOUT_THRESHOLD,
    DEFAULT_VAL_WIDTH,
    LABEL_SOURCES,
    OPERATOR_RE,
    SPLITS,
    AddOutcome,
    FrameRecord,
    binary_mask,
    boxes_from_json,
    boxes_to_json,
    check_source,
    encode_png,
    frame_hash,
    frame_relpath,
    source_kind,
    split_of,
    stronger,
    write_atomic,
)
from inspector.frames import Box
from inspector.imageio import to_gray

__all__ = [
    "DEFAULT_HELDOUT_THRESHOLD",
    "DEFAULT_LOW_CONFIDENCE",
    "DEFAULT_VAL_WIDTH",
    "LABEL_SOURCES",
    "OPERATOR_RE",
    "SPLITS",
    "AddOutcome",
    "FootageStore",
    "FrameRecord",
    "boxes_from_json",
    "boxes_to_json",
    "check_source",
    "encode_png",
    "frame_hash",
    "frame_relpath",
    "source_kind",
    "split_of",
    "to_gray",
    "write_atomic",
]

INDEX_NAME = "index.sqlite"
SCHEMA_VERSION = "1"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS frames (
    frame_id      TEXT PRIMARY KEY,
    width         INTEGER NOT NULL,
    height        INTEGER NOT NULL,
    image_path    TEXT NOT NULL,
    mask_path     TEXT,
    boxes         TEXT,
    label         TEXT,
    label_source  TEXT,
    labelled_at   REAL,
    split         TEXT NOT NULL,
    source_file   TEXT,
    source_format TEXT,
    source_root   TEXT,
    source_split  TEXT,
    imported_at   REAL NOT NULL,
    result_json   TEXT,
    station_label TEXT,
    confidence    REAL
);
CREATE INDEX IF NOT EXISTS frames_split ON frames(split);
CREATE TABLE IF NOT EXISTS feedback (
    frame_id      TEXT NOT NULL,
    result_id     TEXT,
    station       TEXT,
    model_sha256  TEXT,
    operator      TEXT NOT NULL,
    label         TEXT NOT NULL,
    station_label TEXT,
    verdict       TEXT,
    operator_verdict TEXT,
    at            REAL NOT NULL,
    via           TEXT
);
CREATE INDEX IF NOT EXISTS feedback_frame ON feedback(frame_id);
CREATE TABLE IF NOT EXISTS label_history (
    frame_id TEXT NOT NULL,
    label    TEXT,
    source   TEXT NOT NULL,
    at       REAL NOT NULL
);
"""


class FootageStore(StoreReading):
    """A footage store folder (created when ``create`` and it does not exist).

    :param path: the store folder.
    :param create: create an empty store when there is none.
    :param heldout_threshold: held-out threshold of a new store (ignored for an existing
        one: its split never changes).
    :param val_width: width of the val band of a new store (see :func:`split_of`;
        ignored for an existing one).
    :raises FootageError: no store there (and not ``create``), or the index is unreadable.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        create: bool = False,
        heldout_threshold: int = DEFAULT_HELDOUT_THRESHOLD,
        val_width: int = DEFAULT_VAL_WIDTH,
    ) -> None:
        self.root = Path(path).expanduser()
        index = self.root / INDEX_NAME
        if not index.is_file():
            if not create:
                what = "has no " + INDEX_NAME if self.root.is_dir() else "does not exist"
                raise FootageError(
                    f"footage store {self.root} {what} (create one with 'inspector footage "
                    f"import SRC --format FORMAT --store {self.root}')"
                )
            if self.root.exists() and not self.root.is_dir():
                raise FootageError(f"footage store {self.root} is not a folder")
            if not 0 <= heldout_threshold <= 256:
                raise FootageError(f"held-out threshold must be 0..256, got {heldout_threshold}")
            if not 0 <= val_width <= 256 - heldout_threshold:
                raise FootageError(
                    f"val width must be 0..{256 - heldout_threshold} (held-out takes "
                    f"{heldout_threshold}/256), got {val_width}"
                )
            self.root.mkdir(parents=True, exist_ok=True)
        try:
            self.db = sqlite3.connect(str(index), timeout=30.0)
            self.db.row_factory = sqlite3.Row
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
            self.db.executescript(_SCHEMA)
            meta = dict(self.db.execute("SELECT key, value FROM meta").fetchall())
            if not meta:
                with self.db:
                    self.db.executemany(
                        "INSERT INTO meta(key, value) VALUES (?, ?)",
                        [
                            ("schema", SCHEMA_VERSION),
                            ("heldout_threshold", str(int(heldout_threshold))),
                            ("val_width", str(int(val_width))),
                            ("created_at", repr(time.time())),
                        ],
                    )
                meta = dict(self.db.execute("SELECT key, value FROM meta").fetchall())
            self.heldout_threshold = int(meta["heldout_threshold"])
            if "val_width" not in meta:
                meta["val_width"] = str(self._add_val_split())
        except sqlite3.DatabaseError as exc:
            raise FootageError(f"footage store {self.root}: index unreadable ({exc})") from None
        self.val_width = int(meta["val_width"])

    def _add_val_split(self) -> int:
        """Give a store made before the val split its val band: only ``train`` frames move.

        The band is the default width above the held-out threshold (narrower when the
        threshold leaves less room), so each frame's split is what a new store would
        give it; held-out frames never change.
        """
        width = max(0, min(DEFAULT_VAL_WIDTH, 256 - self.heldout_threshold))
        rows = self.db.execute("SELECT frame_id FROM frames WHERE split = 'train'").fetchall()
        moved = [(r[0],) for r in rows if split_of(r[0], self.heldout_threshold, width) == "val"]
        with self.db:
            self.db.executemany("UPDATE frames SET split = 'val' WHERE frame_id = ?", moved)
            self.db.execute(
                "INSERT OR REPLACE INTO meta(key, value) VALUES ('val_width', ?)", (str(width),)
            )
        return width

    # -- context -------------------------------------------------------------------
    def close(self) -> None:
        """Close the index (idempotent)."""
        try:
            self.db.close()
        except sqlite3.Error:  # pragma: no cover - closing twice
            pass

    def __enter__(self) -> FootageStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __len__(self) -> int:
        return int(self.db.execute("SELECT COUNT(*) FROM frames").fetchone()[0])

    def __contains__(self, frame_id: object) -> bool:
        row = self.db.execute("SELECT 1 FROM frames WHERE frame_id = ?", (frame_id,)).fetchone()
        return row is not None

    def commit(self) -> None:
        """Commit pending index changes (:meth:`add` batches them)."""
        self.db.commit()

    def split_of(self, frame_id: str) -> str:
        """The split of ``frame_id`` in this store (``train``, ``val`` or ``heldout``)."""
        return split_of(frame_id, self.heldout_threshold, self.val_width)

    # -- adding --------------------------------------------------------------------
    def add(
        self,
        image: np.ndarray,
        *,
        label: str | None = None,
        label_source: str | None = None,
        mask: np.ndarray | None = None,
        boxes: Sequence[Box] = (),
        source_file: str | None = None,
        source_format: str | None = None,
        source_root: str | None = None,
        source_split: str | None = None,
        result: dict[str, Any] | None = None,
        frame_id: str | None = None,
        commit: bool = True,
    ) -> AddOutcome:
        """Add one frame (stored once: a frame already present is not written again).

        A frame already in the store keeps its row; only what it lacks is filled in: a
        label from a stronger source (``operator`` > ``import`` > ``station-verdict``), a
        mask or boxes, the station's result. Adding the same thing twice changes nothing.

        :param image: the frame (gray or BGR uint8; stored gray).
        :param label: its label, or None.
        :param label_source: where the label comes from (see :data:`LABEL_SOURCES`).
        :param mask: a defect mask of the frame's size (>0 on defects), or None.
        :param boxes: defect boxes in frame pixels.
        :param source_file: the file it came from.
        :param source_format: the importer's name.
        :param source_root: what the import was given.
        :param source_split: the split the source assigned (provenance only).
        :param result: a station Result document.
        :param frame_id: the hash when the caller already computed it.
        :param commit: commit the index now (importers batch and call :meth:`commit`).
        :raises FootageError: bad label source or a mask of another size.
        """
        if label_source is not None:
            check_source(label_source)
        if label is not None and label_source is None:
            label_source = "import"
        gray = to_gray(image, contiguous=True)
        fid = frame_id or frame_hash(gray)
        h, w = gray.shape
        if mask is not None and mask.shape[:2] != (h, w):
            raise FootageError(f"mask is {mask.shape[1]}x{mask.shape[0]} but the image is {w}x{h}")
        if result is not None and label is None and result.get("label") is not None:
            label, label_source = result.get("label"), "station-verdict"
        row = self.db.execute("SELECT * FROM frames WHERE frame_id = ?", (fid,)).fetchone()
        new = _New(fid, gray, label, label_source, mask, boxes, result)
        if row is None:
            source = (source_file, source_format, source_root, source_split)
            self._insert(new, source)
            outcome = AddOutcome(fid, "new")
        else:
            changes = self._fill_in(new, row)
            if not changes:
                return AddOutcome(fid, "present")
            outcome = AddOutcome(fid, "updated", changes)
        if commit:
            self.db.commit()
        return outcome

    def _insert(self, new: _New, source: tuple[str | None, ...]) -> None:
        """Write a frame that is not in the store yet: its PNG, its mask, its row."""
        fid, now = new.fid, time.time()
        img_rel = frame_relpath(fid)
        if not (self.root / img_rel).is_file():
            write_atomic(self.root / img_rel, encode_png(new.gray))
        mask_rel = None
        if new.mask is not None:
            mask_rel = frame_relpath(fid, ".mask.png")
            write_atomic(self.root / mask_rel, encode_png(binary_mask(new.mask)))
        labelled = new.label is not None
        h, w = new.gray.shape
        self.db.execute(
            "INSERT INTO frames(frame_id, width, height, image_path, mask_path, boxes, "
            "label, label_source, labelled_at, split, source_file, source_format, "
            "source_root, source_split, imported_at, result_json, station_label, confidence)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                fid, w, h, img_rel, mask_rel, boxes_to_json(new.boxes),
                new.label, new.label_source if labelled else None, now if labelled else None,
                self.split_of(fid), *source, now,
                *new.result_columns(),
            ),
        )  # fmt: skip
        if labelled:
            self._history(fid, new.label, new.label_source or "import", now)

    def _fill_in(self, new: _New, row: sqlite3.Row) -> list[str]:
        """Give a frame already present what it lacks; the changes, or [] for none."""
        fid, now = new.fid, time.time()
        changes: list[str] = []
        sets: dict[str, Any] = {}
        label, source = new.label, new.label_source
        if label is not None and label != row["label"] and stronger(source, row["label_source"]):
            sets.update(label=label, label_source=source, labelled_at=now)
            changes.append(f"label {row['label']!r} -> {label!r} ({source})")
            self._history(fid, label, source or "import", now)
        if new.mask is not None and row["mask_path"] is None:
            mask_rel = frame_relpath(fid, ".mask.png")
            write_atomic(self.root / mask_rel, encode_png(binary_mask(new.mask)))
            sets["mask_path"] = mask_rel
            changes.append("mask added")
        if new.boxes and not row["boxes"]:
            sets["boxes"] = boxes_to_json(new.boxes)
            changes.append("boxes added")
        if new.result is not None and row["result_json"] is None:
            result_json, station_label, confidence = new.result_columns()
            sets.update(result_json=result_json, station_label=station_label, confidence=confidence)
            changes.append("station result added")
        if sets:
            cols = ", ".join(f"{k} = ?" for k in sets)
            self.db.execute(f"UPDATE frames SET {cols} WHERE frame_id = ?", (*sets.values(), fid))  # noqa: S608
        return changes

    def _history(self, fid: str, label: str | None, source: str, at: float) -> None:
        self.db.execute(
            "INSERT INTO label_history(frame_id, label, source, at) VALUES (?,?,?,?)",
            (fid, label, source, at),
        )

    def set_label(
        self, frame_id: str, label: str, source: str = "operator", *, commit: bool = True
    ) -> bool:
        """Set a frame's label (an operator's correction). Returns whether it changed.

        :param frame_id: the full frame id.
        :param label: the new label.
        :param source: the label source (default ``operator``; ``operator:<name>`` names
            who).
        :param commit: commit now (a batch of corrections commits once).
        :raises FootageError: unknown frame or label source.
        """
        check_source(source)
        row = self.db.execute(
            "SELECT label, label_source FROM frames WHERE frame_id = ?", (frame_id,)
        ).fetchone()
        if row is None:
            raise FootageError(f"no frame {frame_id} in {self.root}")
        if row["label"] == label and row["label_source"] == source:
            return False
        now = time.time()
        self.db.execute(
            "UPDATE frames SET label = ?, label_source = ?, labelled_at = ? WHERE frame_id = ?",
            (label, source, now, frame_id),
        )
        self._history(frame_id, label, source, now)
        if commit:
            self.db.commit()
        return True


class _New:
    """What :meth:`FootageStore.add` was given for one frame, once checked."""

    def __init__(
        self,
        fid: str,
        gray: np.ndarray,
        label: str | None,
        label_source: str | None,
        mask: np.ndarray | None,
        boxes: Sequence[Box],
        result: dict[str, Any] | None,
    ) -> None:
        self.fid, self.gray, self.mask, self.boxes = fid, gray, mask, tuple(boxes)
        self.label, self.label_source, self.result = label, label_source, result

    def result_columns(self) -> tuple[str | None, Any, Any]:
        """``result_json``, ``station_label``, ``confidence`` of the station's Result."""
        if self.result is None:
            return None, None, None
        r = self.result
        return json.dumps(r), r.get("label"), r.get("confidence")
