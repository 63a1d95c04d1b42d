"""Roll-out channels of the model registry: which version each line's stations run.

Each line (a group of stations running the same product) has three channels:

* ``stable``: what the line runs;
* ``canary``: a newer version that a share of the line's stations run instead of
  stable: 5, 20, 75 or 100 % (``SHARES``), chosen per station by a stable hash of
  its id (:func:`bucket`), so the same stations stay on the canary as the share
  grows and a station never flips back and forth;
* ``shadow``: a version that only stations configured for ``@shadow`` run (a
  trial station on the line whose results consumers leave out).

A station follows ``stable`` (the line's roll-out: canary or stable by its share),
``canary`` (the canary whenever the line has one, whatever its share: a station a
plant chooses to try every new version first; stable otherwise) or ``shadow``.

The state lives in ``REGISTRY/channels/<line>.json`` (replaced atomically; a
reader sees the old or the new state, never half of one) and every change is
appended to ``REGISTRY/channels/<line>.log.jsonl`` with who, when, and the states
before and after. Changes take an exclusive lock, so two promotions cannot
interleave. Stations stat the state file before every part, so a promotion or a
rollback reaches each station on its next part.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inspector.errors import FootageError
from inspector.files import write_atomic

CHANNELS = ("stable", "canary", "shadow")
#: The canary's steps, in % of a line's stations.
SHARES = (5, 20, 75, 100)
CHANNEL_DIR = "channels"
LINE_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
#: A channel file larger than this is not one.
MAX_STATE_BYTES = 64 * 1024


def bucket(station_id: str) -> int:
    """The station's place in [0, 100): a canary at share s runs on buckets below s.

    :param station_id: the station's id.
    """
    return int.from_bytes(hashlib.sha256(station_id.encode("utf-8")).digest()[:8], "big") % 100


def check_line(line: str) -> str:
    """:raises FootageError: ``line`` is not a usable line name (it names a file)."""
    if not isinstance(line, str) or not LINE_PATTERN.fullmatch(line):
        raise FootageError(
            f"line {line!r}: letters, digits, '_', '.' and '-' only (at most 64, not starting "
            "with '.' or '-')"
        )
    return line


def _paths(root: str | Path, line: str) -> tuple[Path, Path, Path]:
    d = Path(root) / CHANNEL_DIR
    check_line(line)
    return d / f"{line}.json", d / f"{line}.log.jsonl", d / f".{line}.lock"


def empty_state(line: str) -> dict[str, Any]:
    """A line nothing has been promoted on."""
    return {"line": line, "stable": None, "canary": None, "share": 0, "shadow": None, "revision": 0}


def read_state(root: str | Path, line: str) -> dict[str, Any]:
    """The line's channels (an empty state when nothing was promoted yet).

    :raises FootageError: the state file is unreadable or malformed.
    """
    path, _, _ = _paths(root, line)
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_STATE_BYTES + 1)
    except FileNotFoundError:
        return empty_state(line)
    except OSError as exc:
        raise FootageError(f"{path}: {exc.strerror or exc}") from None
    try:
        doc = json.loads(data) if len(data) <= MAX_STATE_BYTES else None
    except ValueError:
        doc = None
    if not isinstance(doc, dict):
        raise FootageError(f"{path}: not a channel state (JSON object)")
    state = empty_state(line)
    for key in ("stable", "canary", "shadow"):
        v = doc.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            raise FootageError(f"{path}: {key}: expected a version number or null")
        state[key] = v
    share = doc.get("share", 0)
    if share not in (0, *SHARES):
        raise FootageError(f"{path}: share: expected one of 0, {', '.join(map(str, SHARES))}")
    state["share"] = share if state["canary"] is not None else 0
    rev = doc.get("revision", 0)
    state["revision"] = rev if isinstance(rev, int) and not isinstance(rev, bool) else 0
    state["updated_at"] = str(doc.get("updated_at", ""))
    return state


@dataclass(frozen=True)
class Assignment:
    """What one station runs.

    :param version: the registry version number.
    :param channel: ``stable``, ``canary``, ``shadow`` or ``pinned``.
    :param revision: the line state's revision it was read from (0 for a pin).
    """

    version: int
    channel: str
    revision: int = 0


def assign(state: dict[str, Any], station_id: str, want: str = "stable") -> Assignment:
    """The version a station runs.

    :param state: the line's state (:func:`read_state`).
    :param station_id: the station's id (its hash picks canary or stable).
    :param want: the channel the station follows: ``stable`` (the line's roll-out:
        canary when its bucket is inside the canary's share, else stable), ``canary``
        (the canary whenever there is one, else stable) or ``shadow``.
    :raises FootageError: nothing is promoted on the channel the station follows.
    """
    line, rev = state["line"], state["revision"]
    if want == "shadow":
        if state["shadow"] is None:
            raise FootageError(f"line {line}: no version on the shadow channel")
        return Assignment(state["shadow"], "shadow", rev)
    if want not in ("stable", "canary"):
        raise FootageError(f"follow 'stable' (with its canary), 'canary' or 'shadow', not {want!r}")
    in_share = want == "canary" or bucket(station_id) < state["share"]
    if state["canary"] is not None and in_share:
        return Assignment(state["canary"], "canary", rev)
    if state["stable"] is None:
        raise FootageError(
            f"line {line}: nothing promoted to stable yet (inspector models promote VERSION "
            f"--line {line} --to stable)"
        )
    return Assignment(state["stable"], "stable", rev)


@contextlib.contextmanager
def _locked(lock: Path) -> Iterator[None]:
    import fcntl

    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _write_state(path: Path, state: dict[str, Any]) -> None:
    write_atomic(path, json.dumps(state, indent=2) + "\n")


def history(root: str | Path, line: str) -> list[dict[str, Any]]:
    """The line's change log, oldest first (promotions and rollbacks).

    :param root: the registry folder.
    :param line: the line.
    """
    _, log, _ = _paths(root, line)
    try:
        text = log.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise FootageError(f"{log}: {exc.strerror or exc}") from None
    out = []
    for raw in text.splitlines():
        try:
            doc = json.loads(raw)
        except ValueError:
            continue  # a torn last line after a crash: the state file is the truth
        if isinstance(doc, dict):
            out.append(doc)
    return out


def _change(
    root: str | Path, line: str, action: str, by: str, note: str, edit: Any
) -> dict[str, Any]:
    path, log, lock = _paths(root, line)
    try:
        with _locked(lock):
            before = read_state(root, line)
            after = edit(dict(before))
            after["revision"] = before["revision"] + 1
            after["updated_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            _write_state(path, after)
            entry = {
                "at": after["updated_at"],
                "action": action,
                "by": by or os.environ.get("USER", ""),
                "note": note,
                "before": {k: before[k] for k in ("stable", "canary", "share", "shadow")},
                "after": {k: after[k] for k in ("stable", "canary", "share", "shadow")},
                "revision": after["revision"],
            }
            with open(log, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(entry) + "\n")
            return after
    except OSError as exc:
        raise FootageError(f"registry {root}: {exc.strerror or exc}") from None


def promote(
    root: str | Path,
    line: str,
    version: int,
    channel: str,
    share: int | None = None,
    *,
    by: str = "",
    note: str = "",
) -> dict[str, Any]:
    """Put ``version`` on ``channel`` of ``line`` (logged).

    ``canary`` needs a share (5, 20, 75 or 100 %); promoting the canary's version again
    with a larger share is the next step. ``stable`` ends a canary of the same version
    (it graduated). ``shadow`` leaves the others alone.

    :param root: the registry folder.
    :param line: the line.
    :param version: a registered version number.
    :param channel: ``stable``, ``canary`` or ``shadow``.
    :param share: the canary's share in % (canary only).
    :param by: who (default: $USER).
    :param note: why.
    :returns: the new state.
    :raises FootageError: an unknown version, channel or share.
    """
    from inspector.footage.registry import version_dir

    version_dir(root, version)  # raises for a version that is not registered
    if channel not in CHANNELS:
        raise FootageError(f"channel {channel!r}: expected one of {', '.join(CHANNELS)}")
    if channel == "canary":
        if share not in SHARES:
            raise FootageError(
                f"a canary needs --share, one of {', '.join(map(str, SHARES))} (% of stations)"
            )
    elif share is not None:
        raise FootageError(f"--share is for the canary channel, not {channel}")

    def edit(state: dict[str, Any]) -> dict[str, Any]:
        if channel == "canary":
            if version == state["stable"]:
                raise FootageError(f"v{version:04d} is already stable on line {line}")
            state["canary"], state["share"] = version, share
        elif channel == "stable":
            state["stable"] = version
            if state["canary"] == version:
                state["canary"], state["share"] = None, 0
        else:
            state["shadow"] = version
        return state

    return _change(root, line, f"promote {channel}", by, note, edit)


def rollback(
    root: str | Path, line: str, channel: str = "canary", *, by: str = "", note: str = ""
) -> dict[str, Any]:
    """Undo a roll-out on ``line`` (logged); every station follows on its next part.

    * ``canary``: end the canary; every station runs stable.
    * ``stable``: stable goes back to the version it had before its last promotion,
      and any canary ends: the whole line runs the previous known-good version.
    * ``shadow``: clear the shadow channel.

    :param root: the registry folder.
    :param line: the line.
    :param channel: which roll-out to undo.
    :param by: who (default: $USER).
    :param note: why.
    :returns: the new state.
    :raises FootageError: nothing to roll back.
    """
    if channel not in CHANNELS:
        raise FootageError(f"channel {channel!r}: expected one of {', '.join(CHANNELS)}")

    def edit(state: dict[str, Any]) -> dict[str, Any]:
        if channel == "canary":
            if state["canary"] is None:
                raise FootageError(f"line {line}: no canary to roll back")
            state["canary"], state["share"] = None, 0
        elif channel == "shadow":
            if state["shadow"] is None:
                raise FootageError(f"line {line}: nothing on the shadow channel")
            state["shadow"] = None
        else:
            previous = _previous_stable(history(root, line), state["stable"])
            if previous is None:
                raise FootageError(f"line {line}: no earlier stable version to roll back to")
            state["stable"] = previous
            state["canary"], state["share"] = None, 0
        return state

    return _change(root, line, f"rollback {channel}", by, note, edit)


def _previous_stable(past: list[dict[str, Any]], current: int | None) -> int | None:
    """The stable version before ``current`` was last promoted to stable (rollbacks are
    skipped, so a second rollback goes one step further back, not forth again)."""
    for entry in reversed(past):
        if entry.get("action") != "promote stable":
            continue
        before = (entry.get("before") or {}).get("stable")
        after = (entry.get("after") or {}).get("stable")
        if after == current and before is not None and before != current:
            return int(before)
    return None
