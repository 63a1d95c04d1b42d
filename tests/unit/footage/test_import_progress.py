"""Footage import without a terminal: progress lines in the log, never a silent wait."""

from __future__ import annotations

import logging

from inspector.footage.importers import import_footage
from inspector.footage.store import FootageStore

from ._helpers import write_synthetic_manifest


def test_an_import_without_a_bar_logs_progress_lines(tmp_path, caplog, monkeypatch):
    monkeypatch.setenv("INSPECTOR_PROGRESS_INTERVAL", "0")
    manifest = write_synthetic_manifest(tmp_path / "src", 50)
    with FootageStore(tmp_path / "store", create=True) as store:
        with caplog.at_level(logging.INFO, "inspector.progress"):
            report = import_footage(store, manifest, "csv", progress=False)
    assert report.new == 50
    lines = [m for m in caplog.messages if m.startswith("import csv:")]
    assert lines[0].startswith("import csv: 1/50 frames")
    assert lines[-1].endswith("(done)")
