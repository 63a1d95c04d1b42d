"""Term values fitted to people's preferences between inspections (``profile fit``).

Each preference compares two recorded inspections of one part (see
:mod:`inspector.rrm.preference_records` for the file). :func:`features` turns them into
per-term returns under the profile's current values; :func:`fit_values` fits one
positive factor per term with the Bradley-Terry model of
:mod:`inspector.rrm.bradley_terry` (signs kept, pinned terms and bounds respected, a
penalty toward the current values), measures the agreement on held-out preferences
and refuses degenerate or contradictory input with a one-line error.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from inspector.errors import PreferenceError
from inspector.profile import Profile
from inspector.rrm import bradley_terry as bt
from inspector.rrm.preference_records import (
    CHOICES,
    Preference,
    fail,
    plain_value,
    profile_values,
)

#: Multipliers are kept within [1/MAX_FACTOR, MAX_FACTOR] of the current values.
MAX_FACTOR = 100.0
#: Weight of the penalty sum(log(multiplier) ** 2) keeping the values near the current ones.
DEFAULT_PENALTY = 0.1
#: Share of choices assumed made at random (misclicks): see :func:`bradley_terry.fit`.
DEFAULT_LAPSE = 0.1


# -- features ----------------------------------------------------------------------------------


def _factor(term: str, now: Any, then: Any, where: str) -> float:
    """What the raw returns recorded under value ``then`` are multiplied by under ``now``."""
    if isinstance(now, Mapping) != isinstance(then, Mapping):
        raise fail(
            where,
            f"values.{term}",
            "recorded as a per-class mapping in one version and a number in the other",
        )
    pairs = (
        [(float(now.get(c, math.nan)), float(then.get(c, math.nan))) for c in set(now) | set(then)]
        if isinstance(now, Mapping)
        else [(float(now), float(then))]
    )
    ratios = set()
    for n, t in pairs:
        if math.isnan(n) or math.isnan(t):
            raise fail(where, f"values.{term}", "the per-class keys differ from the profile's")
        if t == 0.0:
            if n != 0.0:
                raise fail(
                    where,
                    f"values.{term}",
                    "recorded under value 0: the raw returns say nothing about it",
                )
            continue
        ratios.add(n / t)
    if not ratios:
        return 1.0
    lo, hi = min(ratios), max(ratios)
    if hi - lo > 1e-6 * max(abs(hi), abs(lo)) or lo <= 0:
        raise fail(
            where,
            f"values.{term}",
            "the profile's values are not a positive multiple of the recorded ones "
            "(edited by hand since?); record new pairs",
        )
    return lo


def features(
    profile: Profile, prefs: Sequence[Preference], name: str = "<preferences>"
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Feature matrices of ``a`` and ``b`` and the choices.

    Entry [i, k] is term k's raw return in inspection i, converted to the profile's
    current values and multiplied by the term's channel weight, so ``x.sum(axis=1)`` is the
    inspection's return under the profile.

    :param profile: the profile whose values are fitted.
    :param prefs: the preferences.
    :param name: the file name used in messages.
    :returns: ``xa`` [N, K], ``xb`` [N, K], ``y`` [N] (1 a, 0 b, 0.5 tie).
    :raises PreferenceError: a record does not fit the profile (unknown or missing
        terms, values that cannot be converted).
    """
    names = [t.term for t in profile.terms]
    current = profile_values(profile)
    weight = np.array(list(profile.term_weights().values()))
    xa = np.zeros((len(prefs), len(names)))
    xb = np.zeros((len(prefs), len(names)))
    y = np.zeros(len(prefs))
    for i, p in enumerate(prefs):
        where = f"{name}:{p.line}" if p.line else f"{name}[{i}]"
        if not p.values and p.profile_sha256 != profile.sha256:
            raise fail(
                where,
                "profile_sha256",
                f"recorded under profile {p.profile_sha256[:12]}, not this one "
                f"({profile.sha256[:12]}), and carries no 'values' to convert by",
            )
        factors = np.ones(len(names))
        if p.values:
            for k, term in enumerate(names):
                if term not in p.values:
                    raise fail(where, "values", f"lacks term {term!r} of profile {profile.name!r}")
                factors[k] = _factor(term, current[term], p.values[term], where)
        for side, x in (("a", xa), ("b", xb)):
            terms = getattr(p, side).terms
            for t in terms:
                if t not in current:
                    raise fail(
                        where,
                        f"{side}.terms.{t}",
                        f"not a term of profile {profile.name!r} ({', '.join(names)})",
                    )
            for k, term in enumerate(names):
                if term not in terms:
                    raise fail(where, f"{side}.terms", f"lacks term {term!r}")
                x[i, k] = terms[term] * factors[k] * weight[k]
        y[i] = CHOICES[p.choice]
    return xa, xb, y


# -- fitting -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class TermChange:
    """What the fit did to one term.

    :param term: the term's name.
    :param old: its value before (number or class -> number).
    :param new: its value after (the old one times ``multiplier``, rounded to 4 digits).
    :param multiplier: the fitted factor.
    :param pinned: the engineer pinned it (or its value is 0): it was not fitted.
    :param informed: preferences (not ties) whose two inspections differ in this term.
    :param at_bound: ``lower``/``upper`` when the fit stopped at a bound of the value
        (or of the factor, ``MAX_FACTOR``), else "".
    """

    term: str
    old: Any
    new: Any
    multiplier: float
    pinned: bool
    informed: int
    at_bound: str = ""


@dataclass(frozen=True)
class ValueFit:
    """The result of :func:`fit_values`.

    :param changes: one :class:`TermChange` per term, in profile order.
    :param preferences: number of preferences.
    :param ties: how many of them are ties.
    :param log_likelihood: log-likelihood of all preferences under the new values.
    :param null_log_likelihood: the same for chance (``N * log 1/2``).
    :param agreement: fraction of the non-tie choices the new values agree with.
    :param heldout_agreement: the same on the held-out preferences, fitted without them
        (None when too few to hold any out).
    :param heldout_pairs: non-tie held-out preferences.
    :param beta: the fitted temperature (per reward unit).
    :param dominated: choices of an inspection no better in any term and worse in one.
    :param opposite: pairs judged both ways (same rewards, opposite choices).
    :param penalty: the penalty weight used.
    :param lapse: the lapse share used.
    """

    changes: tuple[TermChange, ...]
    preferences: int
    ties: int
    log_likelihood: float
    null_log_likelihood: float
    agreement: float
    heldout_agreement: float | None
    heldout_pairs: int
    beta: float
    dominated: int
    opposite: int
    penalty: float
    lapse: float = 0.0

    @property
    def multipliers(self) -> dict[str, float]:
        """term -> fitted factor."""
        return {c.term: c.multiplier for c in self.changes}


def theta_bounds(
    profile: Profile, bounds: Mapping[str, tuple[float | None, float | None]]
) -> tuple[np.ndarray, np.ndarray]:
    """Bounds on the log multipliers from value bounds the engineer pins.

    A bound applies to every value of a per-class term. A multiple keeps the sign, so a
    bound that excludes the value's sign is an error, not a flip.

    :param profile: the profile.
    :param bounds: term -> (lowest value or None, highest value or None).
    :raises PreferenceError: an unknown term, or a bound no positive multiple can meet.
    """
    from inspector.yamlio.profile_spec import MAX_REWARD

    names = [t.term for t in profile.terms]
    for term in bounds:
        if term not in names:
            raise PreferenceError(_unknown_term(term, names, "--bound"))
    lo = np.full(len(names), -math.log(MAX_FACTOR))
    hi = np.full(len(names), math.log(MAX_FACTOR))
    for k, t in enumerate(profile.terms):
        vals = [v for v in _flat(t.reward) if v != 0.0]
        blo, bhi = bounds.get(t.term, (None, None))
        blo = -MAX_REWARD if blo is None else max(blo, -MAX_REWARD)
        bhi = MAX_REWARD if bhi is None else min(bhi, MAX_REWARD)
        if blo > bhi:
            raise PreferenceError(f"--bound {t.term}: the lower bound {blo:g} is above {bhi:g}")
        smin, smax = 0.0, math.inf
        for v in vals:
            a, b = (blo / v, bhi / v) if v > 0 else (bhi / v, blo / v)
            smin, smax = max(smin, a), min(smax, b)
        if vals and (smax <= 0 or smin > smax):
            raise PreferenceError(
                f"--bound {t.term}={blo:g}:{bhi:g}: no positive multiple of its value "
                f"{_show(t.reward)} lies within it (the fit keeps signs)"
            )
        if smin > 0:
            lo[k] = max(lo[k], math.log(smin))
        if math.isfinite(smax):
            hi[k] = min(hi[k], math.log(smax))
    return lo, hi


def _flat(v: Any) -> list[float]:
    return [float(x) for x in v.values()] if isinstance(v, Mapping) else [float(v)]


def _show(v: Any) -> str:
    if isinstance(v, Mapping):
        return "{" + ", ".join(f"{k}: {float(x):g}" for k, x in v.items()) + "}"
    return f"{float(v):g}"


def _unknown_term(term: str, names: Sequence[str], flag: str) -> str:
    import difflib

    close = difflib.get_close_matches(term, names, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"{flag} {term}: not a term of the profile{hint}; terms: {', '.join(names)}"


def round_value(v: float, digits: int = 4) -> float:
    """``v`` rounded to ``digits`` significant digits (what the new profile shows)."""
    if v == 0.0 or not math.isfinite(v):
        return v
    return float(f"{v:.{digits}g}")


def scaled(value: Any, s: float) -> Any:
    """A term value (number or class -> number) times ``s``, rounded for the profile."""
    if isinstance(value, Mapping):
        return {k: round_value(float(x) * s) for k, x in value.items()}
    return round_value(float(value) * s)


def fit_values(
    profile: Profile,
    prefs: Sequence[Preference],
    *,
    pins: Iterable[str] = (),
    bounds: Mapping[str, tuple[float | None, float | None]] | None = None,
    penalty: float = DEFAULT_PENALTY,
    lapse: float = DEFAULT_LAPSE,
    holdout: float = 0.2,
    seed: int = 0,
    name: str = "<preferences>",
) -> ValueFit:
    """Fit new term values to preferences (Bradley-Terry, see :mod:`bradley_terry`).

    The held-out agreement comes from a fit without a random ``holdout`` share of the
    preferences; the values returned are then fitted on all of them.

    :param profile: the profile whose values are fitted.
    :param prefs: the preferences (see :func:`load_preferences`).
    :param pins: terms that keep their value.
    :param bounds: term -> (lowest, highest) value allowed (None: open).
    :param penalty: weight of the penalty toward the current values.
    :param lapse: share of choices assumed made at random.
    :param holdout: share of the preferences held out to measure agreement (0: none).
    :param seed: seed of the held-out split.
    :param name: the preferences file's name, for messages.
    :raises PreferenceError: degenerate or contradictory preferences, bad pins or bounds.
    """
    if not prefs:
        raise PreferenceError(f"{name}: no preferences")
    if not (penalty >= 0 and math.isfinite(penalty)):
        raise PreferenceError(f"the penalty must be a non-negative number, got {penalty}")
    if not 0.0 <= lapse < 1.0:
        raise PreferenceError(f"the lapse share must be in [0, 1), got {lapse}")
    if not 0.0 <= holdout < 1.0:
        raise PreferenceError(f"the held-out share must be in [0, 1), got {holdout}")
    names = [t.term for t in profile.terms]
    pins = set(pins)
    for term in pins:
        if term not in names:
            raise PreferenceError(_unknown_term(term, names, "--pin"))
    lo, hi = theta_bounds(profile, bounds or {})
    xa, xb, y = features(profile, prefs, name)
    dx = xa - xb
    zero_value = np.array([all(v == 0.0 for v in _flat(t.reward)) for t in profile.terms])
    free = np.array([n not in pins for n in names]) & ~zero_value
    _check_informative(dx, y, free, names, pins, name)

    n = len(prefs)
    heldout, held_n = _heldout(dx, y, lo, hi, free, penalty, lapse, holdout, seed)
    res = bt.fit(dx, y, lo, hi, free, penalty, lapse)
    df = int(np.count_nonzero(free & np.any(dx[y != 0.5] != 0, axis=0))) + 1
    lr = 2.0 * (res.log_likelihood - res.null_log_likelihood)
    dom = int(np.count_nonzero(bt.dominated(dx, y)))
    opp = _opposite(dx, y)
    if lr < bt.chi2_95(df):
        raise PreferenceError(
            f"{name}: no values explain these preferences better than chance "
            f"(log-likelihood {res.log_likelihood:.2f} against "
            f"{res.null_log_likelihood:.2f}; {opp} pairs judged both ways, {dom} choices of an "
            "inspection worse in every term)"
        )
    agree, _ = bt.agreement(dx, y, res.theta)
    informed = np.count_nonzero((dx != 0) & (y != 0.5)[:, None], axis=0)
    changes = _changes(profile, res.theta, free, lo, hi, informed)
    return ValueFit(
        changes=tuple(changes),
        preferences=n,
        ties=int(np.count_nonzero(y == 0.5)),
        log_likelihood=res.log_likelihood,
        null_log_likelihood=res.null_log_likelihood,
        agreement=agree,
        heldout_agreement=heldout,
        heldout_pairs=held_n,
        beta=float(np.exp(res.log_beta)),
        dominated=dom,
        opposite=opp,
        penalty=float(penalty),
        lapse=float(lapse),
    )


def _heldout(
    dx: np.ndarray,
    y: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    free: np.ndarray,
    penalty: float,
    lapse: float,
    holdout: float,
    seed: int,
) -> tuple[float | None, int]:
    """Agreement on a random ``holdout`` share, fitted without it (None: too few pairs)."""
    n = len(y)
    n_out = int(round(holdout * n))
    if n_out < 1 or n - n_out < 2:
        return None, 0
    order = np.random.default_rng(seed).permutation(n)
    test, train = order[:n_out], order[n_out:]
    if not np.any(y[train] != 0.5):
        return None, 0
    part = bt.fit(dx[train], y[train], lo, hi, free, penalty, lapse)
    agree, n_held = bt.agreement(dx[test], y[test], part.theta)
    return (agree, n_held) if n_held else (None, 0)


def _changes(
    profile: Profile,
    theta: np.ndarray,
    free: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    informed: np.ndarray,
) -> list[TermChange]:
    """One :class:`TermChange` per term, in profile order."""
    changes = []
    for k, t in enumerate(profile.terms):
        s = float(np.exp(theta[k]))
        # A bound on the factor is a bound on the value; for a penalty (negative value)
        # the largest factor is the lowest value.
        negative = next((v < 0 for v in _flat(t.reward) if v != 0.0), False)
        edge = ""
        if free[k] and theta[k] <= lo[k] + 1e-9:
            edge = "upper" if negative else "lower"
        elif free[k] and theta[k] >= hi[k] - 1e-9:
            edge = "lower" if negative else "upper"
        changes.append(
            TermChange(
                term=t.term,
                old=plain_value(t.reward),
                new=scaled(t.reward, s) if free[k] else plain_value(t.reward),
                multiplier=s if free[k] else 1.0,
                pinned=not bool(free[k]),
                informed=int(informed[k]),
                at_bound=edge,
            )
        )
    return changes


def _check_informative(
    dx: np.ndarray, y: np.ndarray, free: np.ndarray, names: list[str], pins: set[str], name: str
) -> None:
    """Degenerate inputs: nothing to learn from, or nothing the fit may change."""
    judged = y != 0.5
    if not np.any(judged):
        raise PreferenceError(f"{name}: every choice is a tie: ties alone cannot order the terms")
    differs = np.any(dx != 0, axis=1) & judged
    if not np.any(differs):
        raise PreferenceError(
            f"{name}: in every pair judged better or worse the two inspections have the same "
            "per-term rewards: nothing tells the terms apart"
        )
    if not np.any(free):
        raise PreferenceError(f"{name}: every term is pinned or 0: nothing to fit")
    if not np.any(dx[differs][:, free] != 0):
        fixed = ", ".join(n for n, f in zip(names, free) if not f)
        raise PreferenceError(
            f"{name}: the pairs differ only in terms the fit may not change ({fixed})"
        )
    dom = bt.dominated(dx, y)
    if np.all(dom[differs]):
        raise PreferenceError(
            f"{name}: every choice prefers the inspection that is worse in every term: no values "
            "with these signs agree with any of them (were 'a' and 'b' swapped?)"
        )


def _opposite(dx: np.ndarray, y: np.ndarray) -> int:
    """Pairs with the same reward differences judged the other way round (both counted)."""
    seen: dict[tuple[float, ...], int] = {}
    for row, c in zip(dx, y):
        if c == 0.5 or not np.any(row):
            continue
        key = tuple(np.round(row if c == 1.0 else -row, 9).tolist())
        seen[key] = seen.get(key, 0) + 1
    return sum(min(n, seen.get(tuple(-v for v in key), 0)) for key, n in seen.items())


def provenance(
    fit: ValueFit, parent: Profile, prefs_sha256: str, fitted_at: str, holdout: float, seed: int
) -> dict[str, Any]:
    """The ``provenance`` block of a fitted profile.

    :param fit: the fit.
    :param parent: the profile it started from.
    :param prefs_sha256: sha256 of the preferences file.
    :param fitted_at: UTC time stamp.
    :param holdout: the held-out share.
    :param seed: the split's seed.
    """
    return {
        "parent_sha256": parent.sha256,
        "method": "bradley-terry",
        "preferences": fit.preferences,
        "preferences_sha256": prefs_sha256,
        "ties": fit.ties,
        "log_likelihood": round(fit.log_likelihood, 4),
        "null_log_likelihood": round(fit.null_log_likelihood, 4),
        "agreement": round(fit.agreement, 4),
        "heldout_agreement": None
        if fit.heldout_agreement is None
        else round(fit.heldout_agreement, 4),
        "heldout_pairs": fit.heldout_pairs,
        "holdout": holdout,
        "seed": seed,
        "penalty": fit.penalty,
        "lapse": fit.lapse,
        "pinned": [c.term for c in fit.changes if c.pinned],
        "multipliers": {c.term: round(c.multiplier, 4) for c in fit.changes},
        "fitted_at": fitted_at,
    }
