"""The student of ``train --members K``: distilled, checked on val against the ensemble
it stands in for (``RUN/ensemble``), distilled again while it falls short, the best on
val kept.

A distillation can go wrong on a seed: on the magnetic tiles one student in four sat at a
val figure of 0.87 where its ensemble stood at 0.94, and it missed the goal on test where
the ensemble met it. So the ensemble is checked on the val frames exactly as a student's
val checks are (:func:`inspector.train.select.policy_figures`: same frames, parts,
search depth and figure, ``select_metric``), and a further student (the next seed) is
distilled while every student so far falls short of it by more than
``student_shortfall``, up to ``student_attempts`` students in all::

    RUN/student        the first student (seed seed+K)
    RUN/student_2 ...  further ones (seeds seed+K+1 ...), only where the first fell short
    RUN/ensemble/val_check.json   the ensemble's figures on the val frames, and their CPU

A student that is plainly not going to make it stops early: every attempt but the last
gives up at its first val check at or after ``student_give_up`` of its steps (half)
whose best val figure so far is more than ``student_give_up_margin`` (0.06) below the
ensemble's and rose less than 0.01 over its last ``student_give_up_patience`` (3)
checks (:mod:`inspector.train.give_up`), and ends with its best model as any run does
(its ``select.json`` says where, ``members.json`` too); the next attempt starts. On the
magnetic tiles (seed 68) a first student sat at 0.843-0.850 on val from 87,500 of its
150,000 steps against its ensemble's 0.963 and ran them all; the next one, kept,
reached 0.949.

The kept student (the best val figure; ties: the earlier) is ``members.json``'s
``student.kept``; :func:`kept_student` finds it. Every attempt's CPU counts to the kept
student's cost. No val frames: one student, nothing to compare.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from inspector.train.config import TrainConfig
from inspector.train.member_run import SPEC_FILE, MemberSpec, cpu_seconds, read_json, write_json

log = logging.getLogger(__name__)

VAL_CHECK = "val_check.json"


def attempt_name(attempt: int) -> str:
    """The folder of student ``attempt`` (0-based): ``student``, ``student_2`` ..."""
    return "student" if attempt == 0 else f"student_{attempt + 1}"


def kept_student(run: str | Path) -> Path:
    """The student a finished ``train --members`` run kept (``RUN/student`` unless
    ``members.json`` names another attempt)."""
    from inspector.train.members import SUMMARY_FILE

    run = Path(run)
    name = (read_json(run / SUMMARY_FILE, {}).get("student") or {}).get("kept")
    if isinstance(name, str) and name.startswith("student") and "/" not in name:
        return run / name
    return run / "student"


def members_run_refusal(path: Path, verb: str) -> str | None:
    """The message for a ``train --members`` run folder given where one model is wanted
    (it holds two: the kept student and the ensemble), or None for any other path."""
    from inspector.train.members import SUMMARY_FILE

    if path.is_dir() and (path / SUMMARY_FILE).is_file() and not (path / "model.zip").is_file():
        return (
            f"{path} is a train --members run: {verb} {kept_student(path)} (one agent) or"
            f" {path / 'ensemble'} (the members' verdict ensemble)"
        )
    return None


def ensemble_val_check(
    ens: Path, camera: str, params: Mapping[str, Any], cfg: TrainConfig
) -> dict[str, Any]:
    """The ensemble's figures on the val frames, checked as a student's are (once:
    ``ens/val_check.json``, its CPU included). ``figure`` is None without val frames."""
    from inspector.train.distill import ensemble_policy
    from inspector.train.select import frames_doc, policy_figures, val_params

    path = ens / VAL_CHECK
    asked = _check_settings(cfg)
    have = read_json(path, {})
    if all(have.get(k) == v for k, v in asked.items()):
        return have
    cpu0 = cpu_seconds()
    val, source = val_params(camera, params, cfg)
    doc: dict[str, Any] = dict(asked)
    if cfg.select_interval == 0:
        doc |= {"figure": None, "why": "select_interval is 0: no student is checked on val"}
    elif val is None:
        doc |= {"figure": None, "why": f"no val frames ({source})"}
    else:
        figures, _ = policy_figures(ensemble_policy(ens, calibrated=False), camera, val, cfg)
        value = figures.get(cfg.select_metric)
        doc |= {
            "figure": None if value is None else float(value),
            "figures": figures,
            "frames": frames_doc(camera, val, int(figures["parts"]), source),
        }
    doc["cpu_s"] = round(cpu_seconds() - cpu0, 2)
    write_json(path, doc)
    return doc


def _check_settings(cfg: TrainConfig) -> dict[str, Any]:
    """What a val check's figure depends on besides the frames (a change: check again)."""
    return {
        "checked": cfg.select_interval > 0,
        "metric": cfg.select_metric,
        "search_depth": cfg.search_depth,
        "episodes": cfg.select_episodes,
        "objective": cfg.operating_point,
        "target": cfg.operating_target,
        "confidence": cfg.operating_confidence,
    }


def val_figure(select: dict, cfg: TrainConfig) -> float | None:
    """A student's kept val figure (from its ``select.json``), None where it has none."""
    value = (select.get("best") or {}).get(cfg.select_metric)
    return float(value) if isinstance(value, (int, float)) else None


def falls_short(figure: float | None, target: float | None, cfg: TrainConfig) -> bool:
    """Whether a student's val figure is more than ``student_shortfall`` below the
    ensemble's (never without the ensemble's figure: nothing to compare with)."""
    if target is None:
        return False
    return figure is None or figure < target - cfg.student_shortfall - 1e-9


def give_up(target: float | None, steps: int, attempt: int, cfg: TrainConfig) -> dict:
    """The give-up settings of student ``attempt`` (0-based) of ``steps`` steps: every
    attempt but the last gives up at its first val check at or after ``student_give_up``
    of its steps whose best so far is more than ``student_give_up_margin`` below the
    ensemble's val figure ``target`` and no longer rising (``student_give_up_patience``
    checks); none without a target: nothing to compare with."""
    last = attempt + 1 >= cfg.student_attempts
    if target is None or last or cfg.student_give_up <= 0:
        return {"give_up_below": None, "give_up_after": 0, "give_up_patience": 0}
    return {
        "give_up_below": round(float(target) - cfg.student_give_up_margin, 6),
        "give_up_after": math.ceil(cfg.student_give_up * steps),
        "give_up_patience": cfg.student_give_up_patience,
    }


def distil_students(
    make_spec: Callable[[int], MemberSpec],
    train: Callable[[Path], None],
    check: Mapping[str, Any],
    cfg: TrainConfig,
) -> dict[str, Any]:
    """Distil students (``make_spec(attempt)``, trained by ``train(spec_path)``, which
    resumes or skips a finished one) until one is within ``student_shortfall`` of the
    ensemble's val figure (``check``) or ``student_attempts`` are spent.

    A student with no val checks (no ``select.json``) is not compared: it is kept.

    :returns: ``members.json``'s ``student`` section: ``kept``, ``attempts`` (name,
        seed, val figure), the ensemble's figure and ``why``, in words.
    """
    target = check.get("figure")
    attempts: list[dict[str, Any]] = []
    for j in range(cfg.student_attempts):
        spec = make_spec(j)
        path = Path(spec.out) / SPEC_FILE
        train(path if path.is_file() else spec.write())
        select = read_json(Path(spec.out) / "select.json", {})
        select = select if isinstance(select, dict) else {}
        figure = val_figure(select, cfg)
        attempts.append({"name": Path(spec.out).name, "seed": spec.config.get("seed"),
                         "figure": figure})  # fmt: skip
        gave_up = select.get("gave_up")
        if gave_up:
            attempts[-1]["gave_up"] = gave_up["steps"]
        if not (Path(spec.out) / "select.json").is_file():
            target = None  # not checked on val: nothing to compare
            check = {**check, "why": f"{attempts[-1]['name']} was not checked on val"}
        if not falls_short(figure, target, cfg):
            break
        if j + 1 < cfg.student_attempts:
            log.warning(
                "%s: val %s %s, the ensemble's %.3f: short by more than %g; distilling"
                " another student", attempts[-1]["name"], cfg.select_metric,
                _f(figure), target, cfg.student_shortfall,
            )  # fmt: skip

    def rank(i: int) -> tuple[float, int]:
        figure = attempts[i]["figure"]
        return (-1.0 if figure is None else figure), -i

    kept = attempts[max(range(len(attempts)), key=rank)]
    return {
        "kept": kept["name"],
        "attempts": attempts,
        "metric": cfg.select_metric,
        "ensemble_figure": check.get("figure"),
        "shortfall": cfg.student_shortfall,
        "why": _why(attempts, kept, target, cfg, check),
    }


def _f(value: float | None) -> str:
    return "none" if value is None else f"{value:.3f}"


def _why(
    attempts: list[dict[str, Any]],
    kept: Mapping[str, Any],
    target: float | None,
    cfg: TrainConfig,
    check: Mapping[str, Any],
) -> str:
    """Why that student, in words (the report's line)."""
    if target is None:
        return f"one student: no val figures to compare ({check.get('why')})"
    figures = ", ".join(
        f"{a['name']} {_f(a['figure'])}"
        + (f" (gave up at {a['gave_up']:,} steps)" if a.get("gave_up") else "")
        for a in attempts
    )
    head = f"val {cfg.select_metric}: ensemble {target:.3f}, {figures}"
    if not falls_short(kept["figure"], target, cfg):
        more = f"; kept {kept['name']}" if len(attempts) > 1 else ""
        return f"{head}: within {cfg.student_shortfall:g} of the ensemble{more}"
    return (
        f"{head}: every student falls short of the ensemble by more than"
        f" {cfg.student_shortfall:g} (student_attempts {cfg.student_attempts}); kept"
        f" {kept['name']}, the best of them. The ensemble may be the better model to deploy"
    )


def train_students(
    profile_path: str,
    camera: str,
    camera_params: Mapping[str, Any],
    steps: int,
    out: Path,
    cfg: TrainConfig,
    members: Sequence[Path],
    ray_address: str | None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The students of a ``train --members`` run in ``out`` whose members and ensemble
    are done: (members.json's ``student`` section, the ensemble's val check)."""
    from inspector.train.cluster import run_specs
    from inspector.train.members import student_spec, student_teacher

    check = ensemble_val_check(out / "ensemble", camera, camera_params, cfg)
    lead, teacher = student_teacher(out, members, cfg)
    k = len(members)

    def make(attempt: int) -> MemberSpec:
        spec = student_spec(
            profile_path, camera, camera_params, steps, out, cfg, k, lead, teacher, attempt
        )
        spec.config.update(give_up(check.get("figure"), steps, attempt, cfg))
        return spec

    def train(spec: Path) -> None:
        run_specs([spec], cfg, ray_address=ray_address, parallel=1)

    return distil_students(make, train, check, cfg), check
