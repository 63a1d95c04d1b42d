"""``profile pairs`` and ``profile fit``: people judge inspections, the values follow.

``profile pairs`` records two inspections of the same part (the scripted teacher
with exploration noise and sometimes a wrong verdict, or a trained model against
such a teacher), draws both glimpse paths side by side into an image, asks which
inspection is better and appends the judged pair to a preferences file (JSON
Lines, see :mod:`inspector.rrm.preferences`). The answer is read as one line from
standard input, so the same command serves a person at a terminal and a script
(``printf 'a\\nb\\ntie\\n' | inspector profile pairs ...``). The image shows the paths,
the truth and the verdicts, not the reward terms: people judge the inspection, and
the fit finds which values agree with them.

``profile fit`` fits the profile's term values to a preferences file
(:func:`inspector.rrm.preferences.fit_values`), writes the new profile version with
its provenance and prints what changed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from inspector.errors import InspectorError, PreferenceError
from inspector.files import write_atomic
from inspector.frames import Frame
from inspector.profile import Profile, load_profile
from inspector.rrm.preference_records import Inspection, Preference, profile_values

#: Exploration rates the two inspections of a pair draw from (0: the plain teacher).
EXPLORE = (0.0, 0.15, 0.3, 0.5)
#: Chance that an inspection's verdict is replaced by a random class.
WRONG_VERDICT = 0.2
#: Inspections recorded per pair shown; the two the current values are least sure of win.
CANDIDATES = 4


def record_inspection(
    env: Any,
    frame: Frame,
    rng: np.random.Generator,
    *,
    explore: float = 0.0,
    wrong: float = 0.0,
    policy: Any = None,
) -> Inspection:
    """Inspect ``frame`` once and sum each term's raw reward over the inspection.

    :param env: an :class:`inspector.env.InspectionEnv` built with ``teacher=True``.
    :param frame: the part.
    :param rng: random stream of the exploration and wrong verdicts.
    :param explore: chance per step of a random action instead of the teacher's.
    :param wrong: chance of a random verdict instead of the teacher's.
    :param policy: a loaded policy to inspect with instead of the teacher (then
        ``explore`` and ``wrong`` are not used).
    """
    obs, info = env.reset(options={"frame": frame})
    classes = env.classes
    act, verdict = int(info.get("teacher", 0)), int(info.get("teacher_verdict", 0))
    totals = dict.fromkeys(env.term_names, 0.0)
    random_verdict = rng.random() < wrong
    done = False
    while not done:
        if policy is not None:
            a, probs = policy.act(obs)
            v = classes.index(policy.verdict(probs))
        else:
            a = act if rng.random() >= explore else int(rng.integers(len(env.scanner.actions)))
            v = int(rng.integers(len(classes))) if random_verdict else max(0, verdict)
        obs, _, term, trunc, info = env.step([int(a), int(v)])
        for name, x in info["terms"].items():
            totals[name] += float(x)
        act = int(info.get("teacher_next", 0))
        verdict = int(info.get("teacher_verdict_next", 0))
        done = term or trunc
    label = info["label"]
    name = "teacher" if policy is None else getattr(policy, "name", "model")
    if policy is None and (explore or random_verdict):
        name += f" (explore {explore:g}{', random verdict' if random_verdict else ''})"
    return Inspection(
        terms=totals,
        verdict=classes[info["verdict"]] if info["verdict"] >= 0 else None,
        label=classes[label] if label >= 0 else None,
        steps=int(info["steps"]),
        path=tuple((p.x, p.y, p.zoom) for p in env.scanner.path),
        policy=name,
    )


def record_pair(
    env: Any,
    frame: Frame,
    rng: np.random.Generator,
    policy: Any = None,
    candidates: int = CANDIDATES,
) -> tuple[Inspection, Inspection]:
    """Two different inspections of ``frame`` worth asking about.

    Records ``candidates`` inspections (noisy teachers; the model's own inspection is
    one of them when ``policy`` is given) and returns the two whose returns under the
    current values are closest among those that differ in some term: the pairs the
    current profile is least sure about are the ones a person's choice teaches most
    (a pair where one inspection is better in every term teaches nothing). The choice
    depends on the inspections only, never on a judgement, so it does not bias the fit.
    The order of the two is random.

    :param env: see :func:`record_inspection`.
    :param frame: the part.
    :param rng: random stream.
    :param policy: a loaded policy for one side; None: all candidates are noisy teachers.
    :param candidates: inspections recorded to choose the pair from (at least 2).
    """
    found: list[Inspection] = []
    if policy is not None:
        found.append(record_inspection(env, frame, rng, policy=policy))
    while len(found) < max(2, candidates):
        found.append(
            record_inspection(
                env, frame, rng, explore=float(rng.choice(EXPLORE)), wrong=WRONG_VERDICT
            )
        )
    weights = env.profile.term_weights()
    returns = [sum(weights[k] * v for k, v in ins.terms.items()) for ins in found]
    best: tuple[float, int, int] | None = None
    for i in range(len(found)):
        for j in range(i + 1, len(found)):
            if policy is not None and i != 0:
                break  # the model's inspection is always one of the two
            if found[i].terms == found[j].terms:
                continue
            gap = abs(returns[i] - returns[j])
            if best is None or gap < best[0]:
                best = (gap, i, j)
    i, j = (best[1], best[2]) if best is not None else (0, 1)
    a, b = found[i], found[j]
    return (b, a) if rng.random() < 0.5 else (a, b)


def simulate_pairs(
    profile: Profile,
    n: int,
    *,
    camera: str = "synthetic",
    params: Mapping[str, Any] | None = None,
    seed: int = 0,
) -> list[tuple[str, Inspection, Inspection]]:
    """``n`` unjudged pairs from the camera (for tests and studies of the fit).

    :param profile: the profile the raw rewards are recorded under.
    :param n: pairs.
    :param camera: camera driver.
    :param params: its parameters.
    :param seed: seed of the frames, exploration and verdicts.
    """
    from inspector.env import InspectionEnv

    env = InspectionEnv(profile, camera, dict(params or {}), teacher=True)
    rng = np.random.default_rng(seed)
    out = []
    try:
        for _ in range(n):
            frame = env.source.next(rng)
            a, b = record_pair(env, frame, rng)
            out.append((frame.part_id, a, b))
    finally:
        env.close()
    return out


def draw_pair(profile: Profile, frame: Frame, a: Inspection, b: Inspection, out: Path) -> None:
    """Both glimpse paths over the part, side by side, with truth and verdicts.

    :param profile: the profile (scan geometry).
    :param frame: the part.
    :param a: the left inspection.
    :param b: the right inspection.
    :param out: the PNG to write.
    """
    from inspector.report import draw_path, pyplot
    from inspector.scan import PathPoint

    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(9, 4.8))
    for ax, side, ins in zip(axes, "ab", (a, b)):
        path = [PathPoint(*p) for p in ins.path]
        draw_path(ax, frame.gray, path, profile.scan.zoom_levels, profile.scan.glimpse)
        verdict = ins.verdict if ins.verdict is not None else "none (ran out of steps)"
        ax.set_title(f"{side}: verdict {verdict}, {ins.steps} steps", fontsize=10)
        _outline_defects(ax, frame)
    truth = a.label if a.label is not None else "unknown"
    fig.suptitle(f"part {frame.part_id} (truth: {truth}): which inspection is better?", fontsize=10)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=80)
    plt.close(fig)


def _outline_defects(ax: Any, frame: Frame) -> None:
    """Outline the true defect (cyan), so the judge sees whether a path found it."""
    if frame.truth is None:
        return
    mask = frame.truth.defect_mask(frame.shape)
    if mask is None or not mask.any():
        return
    import cv2

    contours, _ = cv2.findContours(
        (mask > 0).astype(np.uint8), cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE
    )
    for c in contours:
        c = c.reshape(-1, 2)
        ax.plot(np.append(c[:, 0], c[0, 0]), np.append(c[:, 1], c[0, 1]), "c-", lw=1)


_ANSWERS = {
    "a": "a",
    "b": "b",
    "t": "tie",
    "tie": "tie",
    "s": "skip",
    "skip": "skip",
    "q": "quit",
    "quit": "quit",
}


def ask(prompt: str, stdin: TextIO, stderr: TextIO) -> str:
    """One answer from ``stdin``: ``a``, ``b``, ``tie``, ``skip`` or ``quit`` (end of input)."""
    while True:
        stderr.write(prompt)
        stderr.flush()
        line = stdin.readline()
        if not line:
            return "quit"
        answer = _ANSWERS.get(line.strip().lower())
        if answer is not None:
            return answer
        stderr.write(f"answer a, b, tie, skip or quit (got {line.strip()[:20]!r})\n")
        if not stdin.isatty():
            raise PreferenceError(
                f"answer {line.strip()[:20]!r} is not one of a, b, tie, skip, quit"
            )


def run_pairs(
    args: argparse.Namespace,
    stdin: TextIO | None = None,
    stderr: TextIO | None = None,
    judge: Callable[[str, Inspection, Inspection], str] | None = None,
) -> int:
    """Handler of ``inspector profile pairs``.

    :param args: the parsed arguments.
    :param stdin: where answers come from (standard input).
    :param stderr: where prompts go (standard error).
    :param judge: answers instead of ``stdin`` (tests and simulations).
    """
    from inspector.camera import parse_params
    from inspector.env import InspectionEnv

    stdin = stdin or sys.stdin
    stderr = stderr or sys.stderr
    profile = load_profile(args.file)
    policy = None
    if args.model:
        from inspector.train.torch_policy import load_any_policy

        policy = load_any_policy(args.model)
    out = Path(args.out)
    images = Path(args.images) if args.images else out.with_name(out.stem + "-pairs")
    env = InspectionEnv(profile, args.camera, parse_params(args.param), teacher=True)
    rng = np.random.default_rng(args.seed)
    recorded = 0
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        with open(out, "a", encoding="utf-8") as fh:
            for n in range(1, args.count + 1):
                frame = env.source.next(rng)
                a, b = record_pair(env, frame, rng, policy)
                image = images / f"pair-{args.seed}-{n:04d}.png"
                draw_pair(profile, frame, a, b, image)
                if judge is not None:
                    answer = judge(frame.part_id, a, b)
                else:
                    answer = ask(
                        f"pair {n}/{args.count}, part {frame.part_id}: {image}\n"
                        "which is better? [a/b/tie/skip/quit] ",
                        stdin,
                        stderr,
                    )
                if answer == "quit":
                    break
                if answer == "skip":
                    continue
                pref = Preference(
                    part_id=frame.part_id,
                    a=a,
                    b=b,
                    choice=answer,
                    values=profile_values(profile),
                    profile_sha256=profile.sha256,
                    judge=args.judge,
                )
                doc = pref.to_json()
                doc["recorded_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
                fh.write(json.dumps(doc, separators=(",", ":")) + "\n")
                fh.flush()
                recorded += 1
    except OSError as exc:
        raise InspectorError(f"cannot write {out}: {exc.strerror or exc}") from None
    finally:
        env.close()
    print(f"recorded {recorded} preference(s) in {out} (images in {images})")
    return 0


def _value_text(v: Any) -> str:
    if isinstance(v, Mapping):
        return "{" + ", ".join(f"{k}: {float(x):g}" for k, x in v.items()) + "}"
    return f"{float(v):g}"


def parse_bound(text: str) -> tuple[str, tuple[float | None, float | None]]:
    """``TERM=LO:HI`` (either side may be empty) -> (term, (lo, hi)).

    :raises PreferenceError: malformed.
    """
    term, sep, rng = text.partition("=")
    lo_s, sep2, hi_s = rng.partition(":")
    if not sep or not sep2 or not term:
        raise PreferenceError(f"--bound {text!r}: expected TERM=LO:HI (LO or HI may be empty)")
    try:
        lo = float(lo_s) if lo_s.strip() else None
        hi = float(hi_s) if hi_s.strip() else None
    except ValueError:
        raise PreferenceError(f"--bound {text!r}: LO and HI must be numbers") from None
    for x in (lo, hi):
        if x is not None and not np.isfinite(x):
            raise PreferenceError(f"--bound {text!r}: LO and HI must be finite")
    return term, (lo, hi)


def run_fit(args: argparse.Namespace) -> int:
    """Handler of ``inspector profile fit``."""
    from inspector.rrm.preference_records import load_preferences
    from inspector.rrm.preferences import fit_values, provenance
    from inspector.rrm.profile_rewrite import rewrite_values

    profile = load_profile(args.file, warn=False)
    prefs, prefs_sha = load_preferences(args.preferences)
    bounds = dict(parse_bound(b) for b in args.bound)
    fit = fit_values(
        profile,
        prefs,
        pins=args.pin,
        bounds=bounds,
        penalty=args.penalty,
        lapse=args.lapse,
        holdout=args.holdout,
        seed=args.seed,
        name=args.preferences,
    )
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    prov = provenance(fit, profile, prefs_sha, stamp, args.holdout, args.seed)
    try:
        text = Path(args.file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InspectorError(f"cannot read {args.file}: {exc}") from None
    new_values = {c.term: c.new for c in fit.changes if not c.pinned}
    out_text = rewrite_values(text, args.file, new_values, prov)
    out = Path(args.out)
    try:
        write_atomic(out, out_text)
    except OSError as exc:
        raise InspectorError(f"cannot write {out}: {exc.strerror or exc}") from None
    _print_fit(fit, profile, out)
    return 0


def _print_fit(fit: Any, profile: Profile, out: Path) -> None:
    held = (
        f"{fit.heldout_agreement:.3f} on {fit.heldout_pairs} held-out pairs"
        if fit.heldout_agreement is not None
        else "n/a (too few pairs to hold any out)"
    )
    print(
        f"fitted {profile.name} to {fit.preferences} preference(s) ({fit.ties} ties): "
        f"log-likelihood {fit.log_likelihood:.2f} (chance {fit.null_log_likelihood:.2f}), "
        f"agreement {fit.agreement:.3f}, held-out {held}"
    )
    if fit.dominated or fit.opposite:
        print(
            f"note: {fit.dominated} choice(s) prefer an inspection worse in every term; "
            f"{fit.opposite} pair(s) were judged both ways"
        )
    width = max(len(c.term) for c in fit.changes)
    for c in fit.changes:
        if c.pinned:
            how = "pinned"
        elif c.informed == 0:
            how = "no pair tells it apart: kept"
        else:
            pct = (c.multiplier - 1.0) * 100.0
            how = f"x{c.multiplier:.3f} ({pct:+.1f} %), {c.informed} pairs"
            if c.at_bound:
                how += f", at its {c.at_bound} bound"
        print(f"  {c.term:<{width}}  {_value_text(c.old):>24} -> {_value_text(c.new):<24} {how}")
    print(f"wrote {out}")
