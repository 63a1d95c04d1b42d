"""The reward-term interface that plugins implement.

A profile names terms; each is resolved once, when the profile loads, into a
plain :class:`RewardTerm` object. The environment calls the terms in profile
order at every step with a :class:`StepContext`; no pluggy call happens inside
``env.step()``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from inspector.frames import Frame

OUTCOME = "outcome"
PROCESS = "process"
CHANNELS = (OUTCOME, PROCESS)


@dataclass
class EpisodeContext:
    """What a term sees when an episode starts.

    :param frame: the part being inspected.
    :param label: the true class, or None for unlabelled footage.
    :param defect_mask: boolean (H, W) defect mask from the mask or the boxes, or None.
    :param classes: the profile's classes, ``ok_class`` first.
    :param ok_class: the class meaning "no defect"; None when no class is (``ok_class: none``).
    :param budget: the step budget.
    """

    frame: Frame
    label: str | None
    defect_mask: np.ndarray | None
    classes: tuple[str, ...]
    ok_class: str | None
    budget: int


@dataclass
class StepContext:
    """What a term sees after each step.

    :param episode: the episode's :class:`EpisodeContext`.
    :param step: 0-based index of this step.
    :param action: the action's name: ``up``, ``down``, ``left``, ``right``, ``zoom_in``,
        ``zoom_out`` or ``stop``.
    :param rect: the glimpse rectangle after the action, (x0, y0, x1, y1) in frame pixels.
    :param level: zoom level after the action (0 = whole frame).
    :param native: whether the glimpse is at native resolution (deepest zoom level).
    :param glimpse: the glimpse the agent sees after the action (uint8, square).
    :param moved: False when the action hit the frame edge or a zoom limit and nothing changed.
    :param revisit: the viewport after the action was already visited in this episode.
    :param verdict: the declared class when the action is ``stop``, else None.
    :param terminated: the episode ends here with a verdict.
    :param truncated: the step budget ran out without a verdict.
    """

    episode: EpisodeContext
    step: int
    action: str
    rect: tuple[int, int, int, int]
    level: int
    native: bool
    glimpse: np.ndarray
    moved: bool
    revisit: bool
    verdict: str | None = None
    terminated: bool = False
    truncated: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str | None:
        """The true class of the part."""
        return self.episode.label

    @property
    def ended(self) -> bool:
        """The episode ends at this step (verdict or budget)."""
        return self.terminated or self.truncated


class RewardTerm:
    """Base class of reward terms.

    Subclasses set :attr:`name` and :attr:`channel`, take their parameters as
    keyword arguments of ``__init__`` (with defaults and type hints: the profile
    validator reads them), and implement :meth:`__call__`.

    :param reward: the value the profile gives the term: a number, or for terms with
        ``per_class = True`` also a mapping class -> number.
    """

    #: The name profiles use.
    name: ClassVar[str] = ""
    #: ``outcome`` (the verdict's reward) or ``process`` (how the agent got there).
    channel: ClassVar[str] = PROCESS
    #: Whether ``reward`` may be a per-class mapping.
    per_class: ClassVar[bool] = False
    #: Whether the term can serve as a shaping potential (implements :meth:`potential`).
    is_potential: ClassVar[bool] = False
    #: One line for ``profile schema`` and the README.
    summary: ClassVar[str] = ""

    def __init__(self, reward: float | Mapping[str, float] = 0.0) -> None:
        self.reward = reward

    def value_for(self, cls: str | None) -> float:
        """The reward for class ``cls`` (a per-class mapping falls back to ``default``, else 0)."""
        r = self.reward
        if isinstance(r, Mapping):
            if cls in r:
                return float(r[cls])
            return float(r.get("default", 0.0))
        return float(r)

    def reset(self, episode: EpisodeContext) -> None:
        """Called when an episode starts; reset per-episode state here."""

    def __call__(self, ctx: StepContext) -> float:
        """The term's raw reward for this step."""
        raise NotImplementedError

    def potential(self, ctx: StepContext | EpisodeContext) -> float:
        """Phi(s) of the state after this step (or at reset); only for ``is_potential`` terms."""
        raise NotImplementedError(f"term {self.name!r} is not a potential")

    def verdict_value(self, verdict: str, label: str, classes: tuple[str, ...], ok: str) -> float:
        """The reward an outcome term pays for declaring ``verdict`` on a part of class ``label``.

        Outcome terms implement this; the decision rule (expected reward under the
        classifier's probabilities) and the outcome matrix in ``profile explain`` use it.
        Process terms return 0.
        """
        return 0.0


def level_ok(ctx: StepContext, min_level: int) -> bool:
    """Whether the glimpse of ``ctx`` is zoomed in at least to ``min_level``.

    ``min_level = -1`` means the deepest (native) level; ``-k`` means the k-th deepest,
    which needs ``ctx.extra['levels']`` (the number of zoom levels) and falls back to
    "native only" without it.
    """
    if min_level >= 0:
        return ctx.level >= min_level
    if min_level == -1:
        return bool(ctx.native)
    levels = ctx.extra.get("levels")
    if not levels:
        return bool(ctx.native)
    return ctx.level >= int(levels) + min_level
