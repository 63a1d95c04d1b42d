"""Files: content hashes (sha256) and the one atomic write.

Every file another process may read while it is written (a station's model, an
engine and its sidecar, footage, checkpoints, reports) is written through a
temporary file in the same folder and a rename, so that a reader, or a power
cut, sees the old file or the whole new one, never half of it.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> str:
    """Hex sha256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(chunk)
            if not b:
                break
            h.update(b)
    return h.hexdigest()


def sha256_bytes(data: bytes) -> str:
    """Hex sha256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A temporary path beside ``path``; renamed onto ``path`` when the block succeeds.

    For writers that want a file name (``model.save``, ``fig.savefig``, ``onnx.save``).
    The temporary name keeps ``path``'s suffix (some writers choose their format by it)
    and starts with a dot; it is removed when the block raises.

    :param path: the file to (re)place; its folder is created.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".tmp-{uuid.uuid4().hex}{path.suffix}"
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_atomic(path: str | Path, data: bytes | str) -> Path:
    """Write ``data`` (text is UTF-8) to ``path`` through a temporary file, fsync and rename.

    :returns: ``path``.
    """
    path = Path(path)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
    return path
