"""The footage store: every frame once (by content hash), its label, truth and provenance.

Layout of a store folder (see docs/footage.md)::

    STORE/
      index.sqlite                     # the index (SQLite, WAL journal)
      frames/ab/<frame_id>.png         # the frame, lossless 8-bit gray PNG
      frames/ab/<frame_id>.mask.png    # its defect mask (255 on defects), when it has one

``frame_id`` is the sha256 of the frame's decoded gray pixels (see
:func:`frame_hash`), so the same picture imported twice, from a JPEG or from
the PNG the station wrote, is one frame. The held-out split is a function of
that hash alone: ``heldout`` when the first byte is below the store's
threshold (fixed when the store is created, default 51/256, about 20 %),
``train`` otherwise. Training never reads a held-out frame.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from inspector.errors import FootageError
from inspector.files import sha256_bytes
from inspector.frames import Box, Frame, Truth
from inspector.imageio import to_gray

#: Where a label came from, weakest first: a later, stronger source may replace it.
#: An operator's label may name the operator: ``operator:<name>`` (see :func:`source_kind`).
LABEL_SOURCES: tuple[str, ...] = ("station-verdict", "import", "operator")
#: What an operator's name may look like in ``operator:<name>``.
OPERATOR_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@\-]{0,63}$")
#: Default held-out threshold on the first byte of the frame hash (51/256 = 19.9 %).
DEFAULT_HELDOUT_THRESHOLD = 51
#: Station frames below this confidence are listed for review.
DEFAULT_LOW_CONFIDENCE = 0.6
SPLITS: tuple[str, ...] = ("train", "heldout")
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


def frame_hash(gray: np.ndarray) -> str:
    """The frame id: sha256 of ``b"gray8:<W>x<H>:"`` followed by the pixel bytes (row-major).

    Hashing the decoded pixels rather than a file's bytes makes the id independent of
    the container and the encoder, so a frame the station wrote as PNG and the same
    frame imported from a JPEG replay are one frame.

    :param gray: a 2-D uint8 array.
    """
    g = np.ascontiguousarray(gray, dtype=np.uint8)
    if g.ndim != 2:
        raise ValueError(f"frame_hash expects a 2-D gray image, got shape {g.shape}")
    h, w = g.shape
    return sha256_bytes(f"gray8:{w}x{h}:".encode() + g.tobytes())


def split_of(frame_id: str, threshold: int = DEFAULT_HELDOUT_THRESHOLD) -> str:
    """``heldout`` when the hash's first byte is below ``threshold``, else ``train``.

    :param frame_id: the hex frame hash.
    :param threshold: 0..256; 51 holds out about 20 %.
    """
    return "heldout" if int(frame_id[:2], 16) < threshold else "train"


def encode_png(image: np.ndarray) -> bytes:
    """Lossless PNG bytes of a uint8 image.

    Huffman-only deflate after PNG's SUB row filter: on camera frames (sensor noise
    everywhere, little repetition for LZ77 to find) Huffman-only is both smaller and
    about three times faster than zlib level 3 (measured on 512x512 synthetic panels:
    158 KB in 5 ms against 182 KB in 14 ms), and one fixed filter instead of trying all
    five per row saves another fifth of the time at the same size (5.1 ms against
    6.5 ms, 170 KB both).
    """
    import cv2

    params = [cv2.IMWRITE_PNG_COMPRESSION, 1,
              cv2.IMWRITE_PNG_STRATEGY, cv2.IMWRITE_PNG_STRATEGY_HUFFMAN_ONLY]  # fmt: skip
    if hasattr(cv2, "IMWRITE_PNG_FILTER"):  # OpenCV >= 4.11; older ones filter adaptively
        params += [cv2.IMWRITE_PNG_FILTER, cv2.IMWRITE_PNG_FILTER_SUB]
    ok, buf = cv2.imencode(".png", image, params)
    if not ok:
        raise FootageError("PNG encoding failed")
    return buf.tobytes()


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename.

    A reader (or a crash) sees the old file or the whole new one, never half of it.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".tmp-{uuid.uuid4().hex}{path.suffix}"
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def frame_relpath(frame_id: str, suffix: str = ".png") -> str:
    """``frames/ab/<frame_id><suffix>``: the two-character fan-out keeps folders small."""
    return f"frames/{frame_id[:2]}/{frame_id}{suffix}"


def boxes_to_json(boxes: Sequence[Box]) -> str | None:
    """Boxes as a JSON list of ``[x0, y0, x1, y1, label]`` (None when there are none)."""
    if not boxes:
        return None
    return json.dumps([[b.x0, b.y0, b.x1, b.y1, b.label] for b in boxes])


def boxes_from_json(text: str | None) -> tuple[Box, ...]:
    """Inverse of :func:`boxes_to_json`."""
    if not text:
        return ()
    return tuple(Box(int(a), int(b), int(c), int(d), str(e)) for a, b, c, d, e in json.loads(text))


@dataclass
class FrameRecord:
    """One row of the index.

    :param frame_id: the content hash.
    :param width: frame width in pixels.
    :param height: frame height in pixels.
    :param image_path: the PNG, relative to the store.
    :param mask_path: the mask PNG, relative to the store, or None.
    :param boxes: defect boxes.
    :param label: the label, or None when unlabelled.
    :param label_source: ``import``, ``station-verdict`` or ``operator``.
    :param split: ``train`` or ``heldout`` (by hash).
    :param source_file: the file it was imported from.
    :param source_format: the importer (``csv``, ``masks``, ``station``, ...).
    :param source_root: the folder or file given to the import.
    :param source_split: the split the source (e.g. a manifest) gave it: provenance only.
    :param imported_at: when it entered the store (seconds since the epoch).
    :param result: the station's Result JSON (station frames), or None.
    :param station_label: the class the station declared, or None.
    :param confidence: the station's confidence in that class, or None.
    """

    frame_id: str
    width: int
    height: int
    image_path: str
    mask_path: str | None = None
    boxes: tuple[Box, ...] = ()
    label: str | None = None
    label_source: str | None = None
    split: str = "train"
    source_file: str | None = None
    source_format: str | None = None
    source_root: str | None = None
    source_split: str | None = None
    imported_at: float = 0.0
    result: dict[str, Any] | None = None
    station_label: str | None = None
    confidence: float | None = None

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> FrameRecord:
        """Build from an index row."""
        return cls(
            frame_id=row["frame_id"],
            width=row["width"],
            height=row["height"],
            image_path=row["image_path"],
            mask_path=row["mask_path"],
            boxes=boxes_from_json(row["boxes"]),
            label=row["label"],
            label_source=row["label_source"],
            split=row["split"],
            source_file=row["source_file"],
            source_format=row["source_format"],
            source_root=row["source_root"],
            source_split=row["source_split"],
            imported_at=row["imported_at"],
            result=json.loads(row["result_json"]) if row["result_json"] else None,
            station_label=row["station_label"],
            confidence=row["confidence"],
        )


@dataclass
class AddOutcome:
    """What :meth:`FootageStore.add` did: ``new``, ``present`` (nothing changed) or ``updated``."""

    frame_id: str
    status: str
    changes: list[str] = field(default_factory=list)


def source_kind(source: str | None) -> str | None:
    """The kind of a label source: ``operator:alice`` -> ``operator``; others unchanged."""
    if source is None:
        return None
    return source.split(":", 1)[0]


def check_source(source: str) -> str:
    """``source`` when it is a label source (``import``, ``operator``, ``operator:<name>``...).

    :raises FootageError: unknown kind, or a bad operator name.
    """
    kind, sep, name = source.partition(":")
    if kind not in LABEL_SOURCES or (sep and (kind != "operator" or not OPERATOR_RE.match(name))):
        raise FootageError(
            f"label source must be one of {', '.join(LABEL_SOURCES)} or operator:<name> "
            f"(letters, digits, _ . @ -), got {source!r}"
        )
    return source


def _stronger(new: str | None, old: str | None) -> bool:
    """Whether a label from ``new`` may replace one from ``old``."""
    if new is None:
        return False
    if old is None:
        return True
    rank = LABEL_SOURCES.index
    return rank(source_kind(new) or "") > rank(source_kind(old) or "")


class FootageStore:
    """A footage store folder (created when ``create`` and it does not exist).

    :param path: the store folder.
    :param create: create an empty store when there is none.
    :param heldout_threshold: held-out threshold of a new store (ignored for an existing
        one: its split never changes).
    :raises FootageError: no store there (and not ``create``), or the index is unreadable.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        create: bool = False,
        heldout_threshold: int = DEFAULT_HELDOUT_THRESHOLD,
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
                            ("created_at", repr(time.time())),
                        ],
                    )
                meta = dict(self.db.execute("SELECT key, value FROM meta").fetchall())
        except sqlite3.DatabaseError as exc:
            raise FootageError(f"footage store {self.root}: index unreadable ({exc})") from None
        self.heldout_threshold = int(meta["heldout_threshold"])

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
        station_label = confidence = None
        if result is not None:
            station_label = result.get("label")
            confidence = result.get("confidence")
            if label is None and station_label is not None:
                label, label_source = station_label, "station-verdict"
        mask_rel = None
        if mask is not None:
            mask_rel = frame_relpath(fid, ".mask.png")
        now = time.time()
        row = self.db.execute("SELECT * FROM frames WHERE frame_id = ?", (fid,)).fetchone()
        if row is None:
            img_rel = frame_relpath(fid)
            img_path = self.root / img_rel
            if not img_path.is_file():
                write_atomic(img_path, encode_png(gray))
            if mask is not None:
                write_atomic(self.root / mask_rel, encode_png(_binary(mask)))
            self.db.execute(
                "INSERT INTO frames(frame_id, width, height, image_path, mask_path, boxes, "
                "label, label_source, labelled_at, split, source_file, source_format, "
                "source_root, source_split, imported_at, result_json, station_label, confidence)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    fid,
                    w,
                    h,
                    img_rel,
                    mask_rel,
                    boxes_to_json(boxes),
                    label,
                    label_source if label is not None else None,
                    now if label is not None else None,
                    split_of(fid, self.heldout_threshold),
                    source_file,
                    source_format,
                    source_root,
                    source_split,
                    now,
                    json.dumps(result) if result is not None else None,
                    station_label,
                    confidence,
                ),
            )
            if label is not None:
                self._history(fid, label, label_source or "import", now)
            if commit:
                self.db.commit()
            return AddOutcome(fid, "new")
        changes: list[str] = []
        sets: dict[str, Any] = {}
        if (
            label is not None
            and label != row["label"]
            and _stronger(label_source, row["label_source"])
        ):
            sets.update(label=label, label_source=label_source, labelled_at=now)
            changes.append(f"label {row['label']!r} -> {label!r} ({label_source})")
            self._history(fid, label, label_source or "import", now)
        if mask is not None and row["mask_path"] is None:
            write_atomic(self.root / mask_rel, encode_png(_binary(mask)))
            sets["mask_path"] = mask_rel
            changes.append("mask added")
        if boxes and not row["boxes"]:
            sets["boxes"] = boxes_to_json(boxes)
            changes.append("boxes added")
        if result is not None and row["result_json"] is None:
            sets.update(
                result_json=json.dumps(result), station_label=station_label, confidence=confidence
            )
            changes.append("station result added")
        if not sets:
            return AddOutcome(fid, "present")
        cols = ", ".join(f"{k} = ?" for k in sets)
        self.db.execute(f"UPDATE frames SET {cols} WHERE frame_id = ?", (*sets.values(), fid))  # noqa: S608
        if commit:
            self.db.commit()
        return AddOutcome(fid, "updated", changes)

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
        self, *, split: str | None = None, labelled_only: bool = False
    ) -> list[FrameRecord]:
        """Records in frame-id order (stable, so drivers can index them).

        :param split: ``train``, ``heldout`` or None for both.
        :param labelled_only: skip unlabelled frames.
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
        if cond:
            q += " WHERE " + " AND ".join(cond)
        q += " ORDER BY frame_id"
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


def _binary(mask: np.ndarray) -> np.ndarray:
    m = mask if mask.ndim == 2 else mask[:, :, 0]
    return np.where(m > 0, np.uint8(255), np.uint8(0))
