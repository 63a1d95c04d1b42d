"""A station's model from the registry, followed part by part (``model: registry:LINE@...``).

``registry:line1@stable`` follows line 1's roll-out: the stable version, or the
canary when the station's bucket (a stable hash of its id) falls inside the
canary's share. ``registry:line1@canary`` runs every canary (whatever its share;
stable while there is none). ``registry:line1@shadow`` runs the shadow version.
``registry:line1@v0003`` pins a version. Before every part the station asks
:meth:`Rollout.current`, which costs one ``stat`` of the line's channel file
unless it changed; when the assignment changes the new version's model is loaded
and used from that part on, so a promotion or a rollback reaches every station on
its next part. A version that cannot be loaded is logged and counted, and the
station keeps the model it has (it never stops for a bad roll-out).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inspector.errors import FootageError, InspectorError, ModelError, StationError
from inspector.policy.base import first_difference

log = logging.getLogger(__name__)

PREFIX = "registry:"
_REF = re.compile(r"registry:([^@]+)@(.+)")
#: What a new version shares with the running one to take over between two parts (the
#: scanner, the step budget and every consumer's classes stay as they are).
CONTRACT = ("classes", "actions", "scan", "state_size", "step_budget")


def check_successor(running: Any, new: Any, path: str | Path) -> None:
    """Check that a version can take over from the running model without a restart.

    :param running: the running model's :class:`~inspector.policy.base.ModelMeta`.
    :param new: the new version's metadata.
    :param path: the new version's model file (for the message).
    :raises ModelError: one of :data:`CONTRACT` differs.
    """
    diff = first_difference(running, new, CONTRACT)
    if diff is not None:
        name, a, b = diff
        raise ModelError(
            f"{path}: {name} {b!r} differs from the running model's {a!r} (a version "
            "that changes it takes over when the station restarts)"
        )


@dataclass(frozen=True)
class RegistryRef:
    """A parsed ``registry:LINE@CHANNEL`` or ``registry:LINE@VERSION``.

    :param line: the line.
    :param follow: ``stable``, ``canary`` or ``shadow`` (None for a pinned version).
    :param version: the pinned version (None when following a channel).
    """

    line: str
    follow: str | None
    version: int | None

    def __str__(self) -> str:
        what = self.follow if self.follow else f"v{self.version:04d}"
        return f"{PREFIX}{self.line}@{what}"


def is_ref(path: str) -> bool:
    """Whether a ``model.path`` names the registry."""
    return str(path).startswith(PREFIX)


def parse_ref(text: str) -> RegistryRef:
    """Parse ``registry:LINE@stable|canary|shadow|VERSION``.

    :raises ValueError: malformed (one line, naming the accepted forms).
    """
    from inspector.footage.channels import check_line
    from inspector.footage.registry import parse_version

    m = _REF.fullmatch(str(text).strip())
    forms = "registry:LINE@stable, @canary, @shadow or a version such as registry:LINE@v0003"
    if m is None:
        raise ValueError(f"model.path {text!r}: expected {forms}")
    line, what = m.group(1), m.group(2)
    try:
        check_line(line)
        if what in ("stable", "canary", "shadow"):
            return RegistryRef(line, what, None)
    except FootageError as exc:
        raise ValueError(f"model.path {text!r}: {exc}") from None
    try:
        return RegistryRef(line, None, parse_version(what))
    except FootageError:
        raise ValueError(
            f"model.path {text!r}: after @ give stable, canary, shadow or a version such as "
            f"v0003, not {what!r}"
        ) from None


class Rollout:
    """The registry version one station runs, re-resolved before every part.

    :param root: the registry folder.
    :param ref: what the station's config names.
    :param station_id: the station's id (its hash places it in or out of a canary).
    :param load: loads a policy from a model file (the station's backend settings).
    """

    def __init__(
        self, root: str | Path, ref: RegistryRef, station_id: str, load: Callable[[Path], Any]
    ) -> None:
        self.root = Path(root)
        self.ref = ref
        self.station_id = station_id
        self._load = load
        self._stamp: tuple[int, int, int] | None = None
        self.policy: Any = None
        self.version = 0
        self.channel = ""
        self.path: Path | None = None
        #: versions that failed to load (logged once each, counted by the station)
        self.failures = 0
        self._bad: set[int] = set()
        self.current(first=True)

    @property
    def label(self) -> str:
        """``v0003``: the version as results carry it."""
        return f"v{self.version:04d}"

    def _state_stamp(self) -> tuple[int, int, int] | None:
        from inspector.footage.channels import CHANNEL_DIR

        try:
            st = os.stat(self.root / CHANNEL_DIR / f"{self.ref.line}.json")
        except FileNotFoundError:
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    def current(self, first: bool = False) -> tuple[Any, bool]:
        """The policy to inspect the next part with, and whether it just changed.

        :param first: at start-up: any failure is a :class:`StationError` (there is no
            model to keep).
        :raises StationError: at start-up only.
        """
        from inspector.footage.channels import assign, read_state

        if self.ref.version is not None:  # pinned: resolved once
            if first:
                self._switch(self.ref.version, "pinned", first=True)
            return self.policy, False
        stamp = self._state_stamp()
        if not first and stamp == self._stamp:
            return self.policy, False
        try:
            state = read_state(self.root, self.ref.line)
            got = assign(state, self.station_id, self.ref.follow or "stable")
        except (FootageError, OSError) as exc:
            if first:
                raise StationError(f"model {self.ref}: {exc}") from None
            log.error("model %s: %s; keeping %s", self.ref, exc, self.label)
            self._stamp = stamp
            self.failures += 1
            return self.policy, False
        self._stamp = stamp
        if got.version == self.version:
            changed = got.channel != self.channel
            self.channel = got.channel
            return self.policy, changed
        switched = self._switch(got.version, got.channel, first=first)
        return self.policy, switched

    def _switch(self, version: int, channel: str, first: bool = False) -> bool:
        from inspector.footage.registry import MODEL_FILE, version_dir

        if version in self._bad and not first:
            return False
        try:
            path = version_dir(self.root, version) / MODEL_FILE
            policy = self._load(path)
        except InspectorError as exc:
            if first:
                raise StationError(f"model {self.ref} (v{version:04d}): {exc}") from None
            if version not in self._bad:
                log.error("model v%04d for %s cannot be loaded: %s; keeping %s", version,
                          self.ref, exc, self.label)  # fmt: skip
                self._bad.add(version)
                self.failures += 1
            return False
        if not first:
            log.warning("model %s: %s (%s) -> v%04d (%s)", self.ref, self.label, self.channel,
                        version, channel)  # fmt: skip
        self.policy, self.version, self.channel, self.path = policy, version, channel, path
        return True
