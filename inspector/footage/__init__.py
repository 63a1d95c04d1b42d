"""Footage: the store (frames once, by content hash), importers, the station's recorder,
retraining from collected footage, and the model registry.

Heavy parts (training, export) are imported by the functions that need them.
"""

from __future__ import annotations

from inspector.footage.store import FootageStore, FrameRecord, frame_hash, split_of

__all__ = ["FootageStore", "FrameRecord", "frame_hash", "split_of"]
