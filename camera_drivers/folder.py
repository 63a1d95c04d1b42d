"""The ``folder`` camera: replay collected footage from disk.

Layouts (``layout=auto`` guesses, see :func:`inspector.annotations.detect_layout`):

* ``flat``: images in one folder, unlabelled;
* ``classes``: ``<path>/<class>/**/image``, the sub-folder names the class;
* ``masks``: image + mask pairs, ``x.jpg`` with ``x.png`` beside it
  (magnetic-tile style) or ``masks/x.png``;
* ``manifest``: a CSV with columns ``image,mask,label,split`` (``split`` filters);
* ``voc`` / ``coco``: Pascal VOC XML or COCO JSON boxes; the image's label is
  chosen by ``label_rule`` as ``footage import --label-rule`` chooses it (default
  ``largest-area``: the class with most box area, ``ok`` without boxes).

An unreadable, truncated or zero-byte image is skipped with a warning and
counted in :attr:`stats`; a mask whose size differs from its image is a
:class:`CameraError` naming the file (the footage is wrong, not the frame).
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np

from inspector import CameraDriver, CameraError, FootageError, Frame, Truth, hookimpl
from inspector.annotations import LAYOUTS, OK_CLASS, LabelRule, Record, clip_boxes, discover
from inspector.imageio import read_image, read_mask

#: Label of an unlabelled image whose mask shows a defect.
DEFECT_CLASS = "defect"
#: Decoded images and masks kept in memory by default, MB (``cache_mb``).
CACHE_MB = 256


class DecodedCache:
    """Decoded images and masks, least recently used out first, bounded in bytes; shared
    by every folder camera of the process (training opens one per env on the same files).

    Keyed by the file's path, modification time and size (and how it was decoded), so a
    file changed on disk is decoded again. The arrays are read-only: a caller that wrote
    into a frame would change every later episode on it.
    """

    def __init__(self) -> None:
        self.capacity = 0
        self.used = 0
        self.hits = 0
        self.misses = 0
        self._items: OrderedDict[tuple, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def reserve(self, mb: int) -> None:
        """Make room for at least ``mb`` MB (the largest any camera asked for)."""
        with self._lock:
            self.capacity = max(self.capacity, int(mb) * 2**20)

    def get(self, path: Path, how: str, decode: Callable[[], tuple]) -> tuple:
        """``decode()`` -> (array or None, reason), from memory when the file is unchanged."""
        try:
            st = os.stat(path)
        except OSError:
            return decode()  # it says why
        key = (str(path), st.st_mtime_ns, st.st_size, how)
        with self._lock:
            arr = self._items.get(key)
            if arr is not None:
                self._items.move_to_end(key)
                self.hits += 1
                return arr, None
        arr, why = decode()
        with self._lock:
            self.misses += 1
            if arr is None or arr.nbytes > self.capacity or key in self._items:
                return arr, why
            arr.setflags(write=False)
            self._items[key] = arr
            self.used += arr.nbytes
            while self.used > self.capacity:
                _, old = self._items.popitem(last=False)
                self.used -= old.nbytes
        return arr, why


#: The process's cache of decoded footage.
DECODED = DecodedCache()


class FolderCamera(CameraDriver):
    """Replay images (and their truth) from a folder.

    :param path: the footage folder.
    :param manifest: a CSV manifest (``image,mask,label,split``), relative to ``path``
        or absolute.
    :param split: keep only this split of the manifest (``train``, ``val``, ``test``).
    :param annotations: VOC XML (file or folder) or COCO JSON, relative to ``path`` or
        absolute; the format is detected.
    :param layout: auto, flat, classes, masks, manifest, voc or coco.
    :param loop: start again at the end instead of stopping.
    :param shuffle: visit the images in a random order (a new order each pass).
    :param seed: seed of the shuffle.
    :param grayscale: decode to one channel (else BGR).
    :param label_map: rename labels, ``old:new,...`` (e.g. ``free:ok``).
    :param label: the label of every image that has none from the layout (e.g. ``crack``
        for ``MT_Crack/Imgs`` as image + mask pairs). Without it, an unlabelled image
        with a mask is ``defect`` when the mask has any pixel set, else ``ok``.
    :param label_rule: ``voc``/``coco``: how an image's label is chosen from its boxes,
        as ``footage import --label-rule``: ``largest-area`` (default), ``first-object``,
        ``folder`` (the image's folder name) or ``filename-pattern`` (see
        :mod:`inspector.annotations.labels`); an image it gives no label is skipped.
    :param label_pattern: the regular expression of ``label_rule=filename-pattern``.
    :param cache_mb: decoded images and masks kept in memory (MB, default 256, shared
        by the process's folder cameras; 0: decode every frame from its file). Training
        draws each frame many times: the magnetic tiles' train split is 199 MB decoded.
    """

    has_truth = True

    def __init__(
        self,
        path: str,
        manifest: str | None = None,
        split: str | None = None,
        annotations: str | None = None,
        layout: str = "auto",
        loop: bool = False,
        shuffle: bool = False,
        seed: int = 0,
        grayscale: bool = True,
        label_map: dict[str, str] | None = None,
        label: str | None = None,
        label_rule: str | None = None,
        label_pattern: str | None = None,
        cache_mb: int = CACHE_MB,
    ) -> None:
        super().__init__()
        if isinstance(cache_mb, bool) or not isinstance(cache_mb, int) or cache_mb < 0:
            raise CameraError(
                f"folder: cache_mb must be a whole number of MB >= 0, got {cache_mb!r}"
            )
        self.cache_mb = cache_mb
        if cache_mb:
            DECODED.reserve(cache_mb)
        if layout not in LAYOUTS:
            raise CameraError(
                f"folder: unknown layout {layout!r}; expected one of: {', '.join(LAYOUTS)}"
            )
        self.root = Path(path).expanduser()
        if not self.root.exists():
            raise CameraError(f"folder: footage folder {self.root} does not exist")
        if not self.root.is_dir():
            raise CameraError(f"folder: {self.root} is not a folder")
        skips: list[tuple[str, str]] = []
        try:
            rule = None
            if label_rule is not None or label_pattern is not None:
                rule = LabelRule(label_rule or LabelRule().name, label_pattern)
            self.layout, self.records = discover(
                self.root,
                layout=layout,
                manifest=manifest,
                annotations=annotations,
                split=split,
                label_map=label_map,
                skips=skips,
                label_rule=rule,
            )
        except FootageError as exc:
            raise CameraError(f"folder: {exc}") from None
        for where, why in skips:  # bad rows, escaping paths: counted like unreadable images
            self.stats.skip(where, why)
        if label is not None:
            self.records = [
                r if r.label is not None else replace(r, label=label) for r in self.records
            ]
        if not self.records:
            raise CameraError(f"folder: no images found in {self.root} (layout={self.layout})")
        self.split = split
        self.loop = bool(loop)
        self.shuffle = bool(shuffle)
        self.seed = int(seed)
        self.grayscale = bool(grayscale)
        # Unlabelled footage (a flat folder) is replayed, but has no truth to train on.
        self.has_truth = any(r.label is not None or r.mask is not None for r in self.records)
        self.classes = tuple(sorted({r.label for r in self.records if r.label is not None}))

    def __len__(self) -> int:
        return len(self.records)

    def describe(self) -> str:
        """One line for start-up banners."""
        split = f", split {self.split}" if self.split else ""
        return f"folder {self.root} ({self.layout}{split}, {len(self.records)} images)"

    def _part_id(self, rec: Record) -> str:
        try:
            rel = rec.image.relative_to(self.root)
        except ValueError:
            rel = Path(rec.image.name)
        return rel.with_suffix("").as_posix()

    def load(self, i: int) -> Frame | None:
        """Frame ``i`` of the listing, or None when its image is unreadable (counted as skipped).

        :param i: index into :attr:`records`.
        :raises IndexError: out of range.
        :raises CameraError: the image's mask has another size than the image.
        """
        rec = self.records[i]
        img, why = self._read(rec.image, "gray" if self.grayscale else "bgr",
                              lambda: read_image(rec.image, grayscale=self.grayscale))  # fmt: skip
        if img is None:
            self.stats.skip(str(rec.image), why or "unreadable")
            return None
        mask = None
        if rec.mask is not None:
            mask, why = self._read(rec.mask, "mask", lambda: read_mask(rec.mask))
            if mask is None:
                self.stats.skip(str(rec.image), f"its mask {rec.mask}: {why}")
                return None
            if mask.shape[:2] != img.shape[:2]:
                raise CameraError(
                    f"folder: mask {rec.mask} is {mask.shape[1]}x{mask.shape[0]} but its image "
                    f"{rec.image} is {img.shape[1]}x{img.shape[0]}"
                )
        truth = None
        label = rec.label
        if label is None and mask is not None:
            label = DEFECT_CLASS if mask.any() else OK_CLASS
        if label is not None:
            h, w = img.shape[:2]
            boxes, _ = clip_boxes(rec.boxes, w, h)
            truth = Truth(label=label, mask=mask, boxes=boxes)
        self.stats.frames_read += 1
        return Frame(
            image=img,
            part_id=self._part_id(rec),
            timestamp=time.time(),
            source=f"folder:{rec.image}",
            truth=truth,
            meta={"index": i, "split": rec.split, "path": str(rec.image)},
        )

    def _read(self, path: Path, how: str, decode: Callable[[], tuple]) -> tuple:
        return DECODED.get(path, how, decode) if self.cache_mb else decode()

    def order(self, epoch: int) -> list[int]:
        """The visiting order of pass ``epoch`` (shuffled per pass when ``shuffle``).

        :param epoch: 0 for the first pass.
        """
        idx = list(range(len(self.records)))
        if self.shuffle:
            perm = np.random.default_rng([self.seed, epoch]).permutation(len(idx))
            idx = [int(k) for k in perm]
        return idx

    def frames(self) -> Iterator[Frame]:
        """The readable frames in order; again from the start when ``loop``."""
        epoch = 0
        while True:
            yielded = False
            for i in self.order(epoch):
                frame = self.load(i)
                if frame is not None:
                    yielded = True
                    yield frame
            epoch += 1
            # A looping folder whose every image is unreadable would spin forever.
            if not self.loop or not yielded:
                return


@hookimpl
def register_camera_drivers(register: Callable[..., None]) -> None:
    """Register the ``folder`` driver."""
    register("folder", FolderCamera)
