"""The model registry: promoted models, one folder per version, never rewritten.

Layout::

    REGISTRY/
      v0001/
        model.onnx              # the exported policy (what stations load)
        version.json            # metrics, profile sha256, footage manifest sha256, base ...
        footage_manifest.csv    # frame_id,label,split of the footage it was trained on
        profile.yaml            # the reward profile it was trained with (when given)
      v0002/ ...
      channels/                 # which version each line runs (inspector.footage.channels)
        line1.json, line1.log.jsonl

A version folder is assembled under a temporary name and renamed into place,
so a listing never shows half a version, and two promotions racing for the
same number cannot both win (the loser takes the next one).
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from inspector.errors import FootageError
from inspector.files import sha256_file

VERSION_FILE = "version.json"
MODEL_FILE = "model.onnx"
MANIFEST_FILE = "footage_manifest.csv"
PROFILE_FILE = "profile.yaml"


def _version_dirs(root: Path) -> list[Path]:
    if not root.is_dir():
        return []
    return sorted(
        p for p in root.iterdir() if p.is_dir() and p.name[:1] == "v" and p.name[1:].isdigit()
    )


def list_versions(root: str | Path) -> list[dict[str, Any]]:
    """The registered versions, oldest first (each ``version.json`` plus its folder).

    :param root: the registry folder (a missing folder is an empty registry).
    """
    out = []
    for d in _version_dirs(Path(root)):
        try:
            doc = json.loads((d / VERSION_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # not a complete version (cannot happen through register())
        doc["path"] = str(d)
        out.append(doc)
    return out


def version_dir(root: str | Path, version: int) -> Path:
    """The folder of a registered version.

    :param root: the registry folder.
    :param version: the version number.
    :raises FootageError: no such version (or not a complete one).
    """
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise FootageError(f"registry {root}: a version is a number >= 1, got {version!r}")
    d = Path(root) / f"v{version:04d}"
    if not (d / VERSION_FILE).is_file() or not (d / MODEL_FILE).is_file():
        have = ", ".join(f"v{v['version']:04d}" for v in list_versions(root)) or "none"
        raise FootageError(f"registry {root}: no version v{version:04d} (registered: {have})")
    return d


def parse_version(text: str) -> int:
    """``3``, ``v3`` or ``v0003`` -> 3.

    :raises FootageError: anything else.
    """
    t = str(text).strip()
    digits = t[1:] if t[:1] in ("v", "V") else t
    if not digits.isdigit() or int(digits) < 1:
        raise FootageError(f"version {text!r}: expected a number such as 3 or v0003")
    return int(digits)


def latest(root: str | Path) -> dict[str, Any] | None:
    """The newest version, or None."""
    versions = list_versions(root)
    return versions[-1] if versions else None


def register(
    root: str | Path,
    onnx_path: str | Path,
    *,
    metrics: Mapping[str, Any],
    profile_sha256: str,
    footage_manifest: str | Path | None,
    base: str | None = None,
    base_metrics: Mapping[str, Any] | None = None,
    notes: str = "",
    extra: Mapping[str, Any] | None = None,
    profile: str | Path | None = None,
) -> dict[str, Any]:
    """Register a new version: copy the ONNX file and the footage manifest, write version.json.

    :param root: the registry folder (created).
    :param onnx_path: the exported model.
    :param metrics: its held-out metrics.
    :param profile_sha256: sha256 of the reward profile it was trained with.
    :param footage_manifest: the ``frame_id,label,split`` CSV of its training footage
        (None: unknown, e.g. a model added by hand).
    :param base: the model it was retrained from.
    :param base_metrics: the base's metrics on the same held-out frames.
    :param notes: free text (e.g. the gate's verdict).
    :param extra: more fields for version.json.
    :param profile: the reward profile file, copied into the version (its sha256 must be
        ``profile_sha256``).
    :returns: the version document (with ``version`` and ``path``).
    :raises FootageError: a file is missing or the registry cannot be written.
    """
    root = Path(root)
    files = [Path(onnx_path)] + [Path(p) for p in (footage_manifest, profile) if p is not None]
    for p in files:
        if not p.is_file():
            raise FootageError(f"cannot register: {p} does not exist")
    if profile is not None and sha256_file(profile) != profile_sha256:
        raise FootageError(f"cannot register: {profile} is not the profile {profile_sha256[:12]}")
    try:
        root.mkdir(parents=True, exist_ok=True)
        tmp = root / f".tmp-{uuid.uuid4().hex}"
        tmp.mkdir()
        shutil.copyfile(onnx_path, tmp / MODEL_FILE)
        if footage_manifest is not None:
            shutil.copyfile(footage_manifest, tmp / MANIFEST_FILE)
        if profile is not None:
            shutil.copyfile(profile, tmp / PROFILE_FILE)
        doc: dict[str, Any] = {
            "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "model_sha256": sha256_file(tmp / MODEL_FILE),
            "profile_sha256": profile_sha256,
            "profile_file": PROFILE_FILE if profile is not None else None,
            "footage_manifest_sha256": sha256_file(tmp / MANIFEST_FILE)
            if footage_manifest is not None
            else None,
            "base": base,
            "metrics": dict(metrics),
            "base_metrics": dict(base_metrics) if base_metrics is not None else None,
            "notes": notes,
            **dict(extra or {}),
        }
        for _ in range(1000):
            dirs = _version_dirs(root)
            n = int(dirs[-1].name[1:]) + 1 if dirs else 1
            doc["version"] = n
            (tmp / VERSION_FILE).write_text(json.dumps(doc, indent=2, default=str))
            target = root / f"v{n:04d}"
            try:
                # rename() of a folder onto a name that exists fails: the race is safe.
                os.rename(tmp, target)
            except OSError:
                if target.exists():
                    continue
                raise
            doc["path"] = str(target)
            return doc
        raise FootageError(f"registry {root}: could not take a version number")
    except OSError as exc:
        raise FootageError(f"registry {root}: {exc.strerror or exc}") from None
