"""Reading a footage store: records by split and label, frames with their truth, summaries.

:class:`StoreReading` is the reading half of :class:`inspector.footage.store.FootageStore`
(split off to keep both modules small); it needs the store's ``db`` (an open
:class:`sqlite3.Connection` with ``Row`` rows) and ``root``.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from inspector.errors import FootageError
from inspector.footage.records import SPLITS, FrameRecord, source_kind
from inspector.frames import Frame, Truth

#: Station frames below this confidence are listed for review.
DEFAULT_LOW_CONFIDENCE = 0.6


class StoreReading:
    """Queries on a store's index (mixed into :class:`~inspector.footage.store.FootageStore`)."""

    db: sqlite3.Connection
    root: Path
    heldout_threshold: int
    val_width: int

    # -- reading -------------------------------------------------------------------
    def resolve(self, ident: str) -> str | None:
        """The full frame id of ``ident`` (a full id or a unique prefix of 8+ hex digits).

        :returns: None when unknown or ambiguous.
        """
        ident = ident.strip().lower()
        if len(ident) == 64:
            return ident if ident in self else None
        if len(ident) < 8 or any(c not in "0123456789abcdef" for c in ident):
            return None
        rows = self.db.execute(
            "SELECT frame_id FROM frames WHERE frame_id >= ? AND frame_id < ? LIMIT 2",
            (ident, ident + "g"),
        ).fetchall()
        return rows[0][0] if len(rows) == 1 else None

    def get(self, frame_id: str) -> FrameRecord:
        """The record of ``frame_id``.

        :raises FootageError: no such frame.
        """
        row = self.db.execute("SELECT * FROM frames WHERE frame_id = ?", (frame_id,)).fetchone()
        if row is None:
            raise FootageError(f"no frame {frame_id} in {self.root}")
        return FrameRecord.from_row(row)

    def records(
        self,
        *,
        split: str | None = None,
        labelled_only: bool = False,
        label: str | None = None,
        source_glob: str | None = None,
        limit: int | None = None,
    ) -> list[FrameRecord]:
        """Records in frame-id order (stable, so drivers can index them).

        :param split: ``train``, ``val``, ``heldout`` or None for all.
        :param labelled_only: skip unlabelled frames.
        :param label: only frames of this label (``-`` for unlabelled ones).
        :param source_glob: only frames whose source file matches this glob
            (``*`` and ``?``, as SQLite's GLOB: case-sensitive, ``/`` matched by ``*``).
        :param limit: at most this many.
        :raises FootageError: unknown split.
        """
        if split is not None and split not in SPLITS:
            raise FootageError(f"unknown split {split!r}; expected one of: {', '.join(SPLITS)}")
        q = "SELECT * FROM frames"
        cond, args = [], []
        if split is not None:
            cond.append("split = ?")
            args.append(split)
        if labelled_only:
            cond.append("label IS NOT NULL")
        if label == "-":
            cond.append("label IS NULL")
        elif label is not None:
            cond.append("label = ?")
            args.append(label)
        if source_glob is not None:
            cond.append("source_file GLOB ?")
            args.append(source_glob)
        if cond:
            q += " WHERE " + " AND ".join(cond)
        q += " ORDER BY frame_id"
        if limit is not None:
            q += " LIMIT ?"
            args.append(int(limit))
        return [FrameRecord.from_row(r) for r in self.db.execute(q, args)]

    def iter_records(self) -> Iterator[FrameRecord]:
        """Every record in frame-id order."""
        for r in self.db.execute("SELECT * FROM frames ORDER BY frame_id"):
            yield FrameRecord.from_row(r)

    def load_image(self, rec: FrameRecord) -> np.ndarray:
        """The frame's gray pixels.

        :raises FootageError: the PNG is missing or damaged.
        """
        from inspector.imageio import read_image

        img, why = read_image(self.root / rec.image_path, grayscale=True)
        if img is None:
            raise FootageError(f"footage store {self.root}: frame {rec.image_path}: {why}")
        return img

    def load_mask(self, rec: FrameRecord) -> np.ndarray | None:
        """The frame's mask (uint8, 255 on defects), or None.

        :raises FootageError: the mask file is missing or damaged.
        """
        if rec.mask_path is None:
            return None
        from inspector.imageio import read_mask

        mask, why = read_mask(self.root / rec.mask_path)
        if mask is None:
            raise FootageError(f"footage store {self.root}: mask {rec.mask_path}: {why}")
        return mask

    def frame(self, rec: FrameRecord, *, label_map: dict[str, str] | None = None) -> Frame:
        """A :class:`Frame` with its truth (label, mask, boxes) for training or review.

        :param rec: the record.
        :param label_map: rename labels (``free`` -> ``ok``...).
        """
        img = self.load_image(rec)
        truth = None
        if rec.label is not None:
            label = (label_map or {}).get(rec.label, rec.label)
            truth = Truth(label=label, mask=self.load_mask(rec), boxes=rec.boxes)
        return Frame(
            image=img,
            part_id=rec.frame_id,
            timestamp=rec.imported_at,
            source=f"store:{self.root}/{rec.image_path}",
            truth=truth,
            meta={
                "frame_id": rec.frame_id,
                "split": rec.split,
                "label_source": rec.label_source,
                "source_file": rec.source_file,
            },
        )

    # -- summaries -----------------------------------------------------------------
    def summary(self) -> dict[str, Any]:
        """Counts: frames, by split, by label, by label source, unlabelled."""
        rows = self.db.execute("SELECT split, label, label_source FROM frames").fetchall()
        return {
            "frames": len(rows),
            "splits": dict(Counter(r["split"] for r in rows)),
            "labels": dict(Counter(r["label"] or "(unlabelled)" for r in rows)),
            "label_sources": dict(Counter(r["label_source"] or "(none)" for r in rows)),
            "unlabelled": sum(1 for r in rows if r["label"] is None),
            "heldout_threshold": self.heldout_threshold,
            "val_width": self.val_width,
        }

    def needs_review(
        self, *, low_confidence: float = DEFAULT_LOW_CONFIDENCE
    ) -> list[tuple[FrameRecord, str]]:
        """Frames a person should look at, with why: ``unlabelled``, ``low confidence``,
        ``disagreement`` (the label differs from what the station declared).

        Operator-labelled frames are settled and never listed.

        :param low_confidence: station frames whose confidence is below this are listed
            while their label is still the station's verdict.
        """
        out = []
        for rec in self.iter_records():
            if source_kind(rec.label_source) == "operator":
                continue
            if rec.label is None:
                out.append((rec, "unlabelled"))
            elif rec.station_label is not None and rec.station_label != rec.label:
                out.append((rec, f"disagreement (station said {rec.station_label})"))
            elif (
                rec.label_source == "station-verdict"
                and rec.confidence is not None
                and rec.confidence < low_confidence
            ):
                out.append((rec, f"low confidence ({rec.confidence:.2f})"))
        return out

    def manifest_rows(self, records: Iterable[FrameRecord]) -> list[tuple[str, str, str]]:
        """``(frame_id, label, split)`` rows, sorted: what a training run used."""
        return sorted((r.frame_id, r.label or "", r.split) for r in records)
