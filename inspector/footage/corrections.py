"""An operator's label corrections: a ``frame_id,label`` CSV (``footage label``)."""

from __future__ import annotations

import csv
import re
from pathlib import Path

from inspector.errors import FootageError

#: What a label may look like (the profile's class-name rule, plus upper case).
LABEL_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_\-]{0,63}$")


def read_label_csv(path: Path) -> tuple[list[tuple[int, str, str]], list[str]]:
    """Rows ``(line, frame_id, label)`` of a corrections CSV, and the bad rows' messages.

    :param path: the CSV (``frame_id,label``; a header line is optional).
    :raises FootageError: the file cannot be read.
    """
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise FootageError(f"label CSV {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise FootageError(f"cannot read label CSV {path}: {exc}") from None
    rows, bad = [], []
    for n, row in enumerate(csv.reader(text.splitlines()), start=1):
        cells = [c.strip() for c in row]
        if not cells or all(not c for c in cells) or cells[0].startswith("#"):
            continue
        if n == 1 and cells[0].lower() == "frame_id":
            continue
        if len(cells) != 2:
            bad.append(f"{path}:{n}: expected 2 columns frame_id,label, got {len(cells)}")
            continue
        fid, label = cells
        if not label:
            bad.append(f"{path}:{n}: empty label for {fid or '(no frame id)'}")
        elif not LABEL_RE.match(label):
            bad.append(f"{path}:{n}: bad label {label!r} (letters, digits, _ and -)")
        else:
            rows.append((n, fid, label))
    return rows, bad
