"""The ``store`` camera: replay a footage store's frames with their labels, masks and boxes.

Training reads the store's ``train`` split through this driver, checkpoint
selection and calibration its ``val`` split, and the final evaluation its
``heldout`` split (``split=heldout``); the split is fixed by each frame's content
hash, so no held-out frame is ever trained on or chosen on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from inspector import CameraDriver, CameraError, FootageError, Frame, hookimpl
from inspector.footage.store import SPLITS, FootageStore, check_source, source_kind


class StoreCamera(CameraDriver):
    """Frames of a footage store, in frame-id order.

    :param path: the store folder.
    :param split: ``train``, ``val``, ``heldout`` or none (all frames).
    :param labelled_only: only frames that have a label (training and evaluation need
        one); false also replays unlabelled frames, without truth.
    :param label_map: rename labels, ``old:new,...`` (e.g. ``free:ok``).
    :param label_source: only frames labelled by this source: ``operator`` (any operator:
        what ``calibrate`` uses to choose the operating point from operator-confirmed
        parts), ``operator:<name>``, ``import`` or ``station-verdict``.
    """

    has_truth = True

    def __init__(
        self,
        path: str,
        split: str | None = None,
        labelled_only: bool = True,
        label_map: dict[str, str] | None = None,
        label_source: str | None = None,
    ) -> None:
        super().__init__()
        if split is not None and split not in SPLITS:
            raise CameraError(
                f"store: unknown split {split!r}; expected one of: {', '.join(SPLITS)} or none"
            )
        try:
            self.store = FootageStore(path)
            self.records = self.store.records(split=split, labelled_only=labelled_only)
            if label_source:
                check_source(label_source)
                exact = ":" in label_source
                self.records = [
                    r
                    for r in self.records
                    if (r.label_source if exact else source_kind(r.label_source)) == label_source
                ]
        except FootageError as exc:
            raise CameraError(f"store: {exc}") from None
        if not self.records:
            what = "labelled frames" if labelled_only else "frames"
            src = f" labelled by {label_source}" if label_source else ""
            raise CameraError(f"store: {path} has no {what}{src} in split {split or 'any'}")
        self.path = path
        self.split = split
        self.label_map = dict(label_map or {})
        self.classes = tuple(
            sorted({self.label_map.get(r.label, r.label) for r in self.records if r.label})
        )

    def __len__(self) -> int:
        return len(self.records)

    def describe(self) -> str:
        """One line for start-up banners."""
        return f"store {self.path} (split {self.split or 'all'}, {len(self.records)} frames)"

    def load(self, i: int) -> Frame | None:
        """Frame ``i``, or None when its file is damaged (counted as skipped).

        :param i: index into :attr:`records`.
        :raises IndexError: out of range.
        """
        rec = self.records[i]
        try:
            frame = self.store.frame(rec, label_map=self.label_map)
        except FootageError as exc:
            self.stats.skip(rec.frame_id, str(exc))
            return None
        self.stats.frames_read += 1
        return frame

    def frames(self) -> Iterator[Frame]:
        """Every readable frame once, in frame-id order."""
        for i in range(len(self.records)):
            frame = self.load(i)
            if frame is not None:
                yield frame

    def close(self) -> None:
        """Close the store's index."""
        self.store.close()


@hookimpl
def register_camera_drivers(register: Callable[..., None]) -> None:
    """Register the ``store`` driver."""
    register("store", StoreCamera)
