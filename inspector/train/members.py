"""``train --members K``: K members, their verdict ensemble, and one distilled student.

The run directory::

    RUN/members.json          what was asked (members, steps, seeds) and the results
    RUN/report.md             members, ensemble and student side by side
    RUN/members/m0 ... mK-1   one ordinary training run per member (seeds seed..seed+K-1)
    RUN/ensemble/             ensemble.json (the members, lead m0) + report.json/png
    RUN/student/              the distilled student: an ordinary run (export it)
    RUN/student_2/ ...        further students, only where the first fell short of the
                              ensemble on val (:mod:`inspector.train.students`);
                              members.json's ``student.kept`` names the one to export

Every member is a spec file trained by :func:`inspector.train.member_run.run_member`
in a local process or a Ray task (:mod:`inspector.train.cluster`), resuming from its
last checkpoint wherever it died; a finished member is not trained again.

The student is the same kind of spec: initialised from the lead member's weights and
taught by the ensemble (:class:`inspector.train.distill.EnsembleTeacher`): by default
(``distill: supervised``) it learns the ensemble's verdict and moves on the states it
visits (:mod:`inspector.train.dagger`); with ``distill: ppo`` it trains with the hybrid
loss whose KL term's teacher is the ensemble, ``distill_w_kd`` its weight. A station
then runs one agent at one agent's cost.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inspector.errors import InspectorError
from inspector.train.config import TrainConfig
from inspector.train.member_run import (
    COST_FILE,
    SPEC_FILE,
    MemberSpec,
    cpu_seconds,
    read_json,
    write_json,
)
from inspector.train.students import attempt_name, train_students

SUMMARY_FILE = "members.json"
TABLE_FILE = "report.md"


def member_specs(
    profile: str,
    camera: str,
    params: Mapping[str, Any],
    timesteps: int,
    out: Path,
    cfg: TrainConfig,
    k: int,
) -> list[MemberSpec]:
    """The K members: seeds ``cfg.seed`` .. ``cfg.seed + K - 1``, in ``out/members/m<i>``."""
    base = dataclasses.asdict(cfg)
    return [
        MemberSpec(
            name=f"m{i}",
            profile=str(Path(profile).resolve()),
            camera=camera,
            params=dict(params),
            timesteps=int(timesteps),
            out=str((out / "members" / f"m{i}").resolve()),
            config={**base, "seed": cfg.seed + i},
        )
        for i in range(k)
    ]


def student_spec(
    profile: str,
    camera: str,
    params: Mapping[str, Any],
    timesteps: int,
    out: Path,
    cfg: TrainConfig,
    k: int,
    lead: str = "m0",
    ensemble: str = "ensemble",
    attempt: int = 0,
) -> MemberSpec:
    """The student: member ``lead``'s weights (m0 by default), the members' ensemble
    (``out/<ensemble>``, led by it) as its teacher; ``attempt`` (0-based) chooses its
    folder and seed (:mod:`inspector.train.students`: ``student``, seed ``seed+k``).

    Nothing is pretrained again (the lead's perception and cloning carry over), the
    critic is the lead's (no warm-up); with ``cfg.distill_init == "scratch"`` the student
    starts from fresh weights and pretrains its own perception (``perception_samples``).
    ``cfg.distill``: ``supervised`` distils all ``timesteps`` without PPO
    (:mod:`inspector.train.dagger`); ``ppo`` trains them with the hybrid loss whose KL
    term (weight ``cfg.distill_w_kd``) has the ensemble as teacher.
    """
    ens = (out / ensemble).resolve()
    scratch = cfg.distill_init == "scratch"
    config = {
        **dataclasses.asdict(cfg),
        "seed": cfg.seed + k + attempt,
        "teacher": str(ens),
        "w_kd": cfg.distill_w_kd,
        "bc_samples": 0,
        "cnn_channels": cfg.student_cnn_channels or cfg.cnn_channels,
        "cnn_separable": cfg.student_cnn_separable or cfg.cnn_separable,
        "perception_samples": cfg.perception_samples if scratch else 0,
        "critic_warmup": 0,
        "supervised_distill_steps": int(timesteps) if cfg.distill == "supervised" else 0,
    }
    name = attempt_name(attempt)
    return MemberSpec(
        name=name,
        profile=str(Path(profile).resolve()),
        camera=camera,
        params=dict(params),
        timesteps=int(timesteps),
        out=str((out / name).resolve()),
        config=config,
        teacher=str(ens),
        init_from=None if scratch else str((out / "members" / lead).resolve()),
    )


@dataclass
class MembersResult:
    """What ``train --members`` produced."""

    out: Path
    student: Path
    ensemble: Path
    summary: dict[str, Any]


#: The ``train`` option that sets each of a run's asked settings.
_FLAGS = {
    "members": "--members",
    "timesteps": "--timesteps",
    "distill_timesteps": "--distill-timesteps",
    "seed": "--seed",
}


def _check_same_run(out: Path, asked: Mapping[str, Any]) -> None:
    """On --resume, refuse settings that differ from the run's (a preset's defaults may
    have changed since it started: the error names the option that restores them)."""
    have = read_json(out / SUMMARY_FILE, {}).get("asked")
    if not have:
        return
    for key, value in asked.items():
        if key in have and have[key] != value:
            flag = _FLAGS.get(key)
            how = f"add {flag} {have[key]}" if flag else "use the same settings"
            raise InspectorError(
                f"{out} was started with {key}={have[key]!r}, not {value!r}; to resume it,"
                f" {how}; or choose another --out"
            )


def train_members(
    profile_path: str,
    camera: str,
    camera_params: Mapping[str, Any],
    timesteps: int,
    out: str | Path,
    cfg: TrainConfig,
    k: int,
    *,
    resume: bool = False,
    ray_address: str | None = None,
    parallel: int | None = None,
    distill_timesteps: int | None = None,
) -> MembersResult:
    """K members, their ensemble and the distilled student; see the module docstring.

    :param ray_address: run the members (and the student) as Ray tasks on this
        cluster; ``out`` must then be a path every node sees.
    :param parallel: local member processes at once (default: sized to the cores).
    :param distill_timesteps: the student's steps (default ``cfg.distill_timesteps``,
        0 there: half a member's).
    :raises InspectorError: fewer than two members, a run directory of another run.
    """
    from inspector.train.cluster import run_specs

    if k < 2:
        raise InspectorError(f"--members needs at least 2 members, got {k}")
    out = Path(out)
    steps = distill_timesteps or cfg.distill_timesteps or max(1, timesteps // 2)
    asked = {"members": k, "timesteps": timesteps, "distill_timesteps": steps, "seed": cfg.seed}
    if (out / SUMMARY_FILE).is_file() and not resume:
        raise InspectorError(
            f"{out} already holds a --members run; pass --resume to continue it"
            " or choose another --out"
        )
    out.mkdir(parents=True, exist_ok=True)
    _check_same_run(out, asked)
    write_json(out / SUMMARY_FILE, {"asked": asked, "status": "members"})
    specs = member_specs(profile_path, camera, camera_params, timesteps, out, cfg, k)
    paths = [
        s.write() if not (Path(s.out) / SPEC_FILE).is_file() else Path(s.out) / SPEC_FILE
        for s in specs
    ]
    run_specs(paths, cfg, ray_address=ray_address, parallel=parallel)

    from inspector.train.distill import write_ensemble

    ens = write_ensemble(out / "ensemble", [s.out for s in specs])
    depth = members_depth([Path(s.out) for s in specs], cfg)
    cfg = cfg.replace(search_depth=depth["search_depth"])
    asked_depth = {"asked": asked, "search_depth": depth}
    if not (ens / "report.json").is_file():
        write_json(out / SUMMARY_FILE, {**asked_depth, "status": "ensemble"})
        evaluate_ensemble(ens, camera, camera_params, cfg)
    write_json(out / SUMMARY_FILE, {**asked_depth, "status": "student"})
    ms = [Path(s.out) for s in specs]
    chosen, check = train_students(
        profile_path, camera, camera_params, steps, out, cfg, ms, ray_address
    )
    summary = {
        **asked_depth,
        "status": "done",
        "student": chosen,
        **summarise(out, [s.name for s in specs], chosen, check),
    }
    write_json(out / SUMMARY_FILE, summary)
    (out / TABLE_FILE).write_text(table_markdown(summary))
    student = out / chosen["kept"]
    return MembersResult(out, student, ens, summary)


def members_depth(members: Sequence[Path], cfg: TrainConfig) -> dict[str, Any]:
    """The search depth of the ensemble and the student: with ``search_depth: auto``,
    the depth whose objective figure, averaged over the members' own calibrations on val
    (each member's report.json ``operating_point.depths``), is best (ties: the deeper).

    The members are independent readings of the same recipe on the same frames, so their
    pooled evidence on whether deeper glimpses help is steadier than one model's; the
    ensemble and the student are built from them. Without members' depths (no val
    frames, another setting) the ensemble and the student choose on their own as asked.

    :returns: ``search_depth`` (what the ensemble's and student's calibration use) and
        ``why``, in words, with ``scores`` per depth when pooled.
    """
    from inspector.train.calibration import pooled_depth

    if cfg.search_depth != "auto":
        return {"search_depth": cfg.search_depth, "why": f"search_depth: {cfg.search_depth}"}
    tables = [
        (read_json(m / "report.json", {}).get("operating_point") or {}).get("depths") or []
        for m in members
    ]
    tables = [t for t in tables if t]
    if not tables:
        return {"search_depth": "auto", "why": "the members chose no depth: each model its own"}
    depth: str | int
    depth, scores = pooled_depth(tables, cfg.operating_point)
    if depth == _native_level(members):  # the full search (every level the profile has)
        depth = "full"
    return {
        "search_depth": depth,
        "why": f"pooled over {len(tables)} members' val calibrations",
        "scores": scores,
    }


def _native_level(members: Sequence[Path]) -> int | None:
    """The deepest zoom level of the members' profile (their run's copy), or None."""
    from inspector.profile import load_profile

    try:
        return int(load_profile(str(Path(members[0]) / "profile.yaml")).scan.zoom_levels) - 1
    except (InspectorError, OSError, ValueError):
        return None


def student_teacher(out: Path, members: Sequence[Path], cfg: TrainConfig) -> tuple[str, str]:
    """The member the student starts from and its teacher's folder inside ``out``.

    The teacher is the members' ensemble led by that member (its moves; the verdict is
    the members' joint one either way): ``ensemble`` itself when the lead m0 starts the
    student, else ``ensemble_<member>`` (written here). ``ensemble`` stays led by m0.
    """
    from inspector.train.distill import write_ensemble

    first = lead_member(members, cfg)
    if first == members[0].name:
        return first, "ensemble"
    order = [m for m in members if m.name == first] + [m for m in members if m.name != first]
    write_ensemble(out / f"ensemble_{first}", order)
    return first, f"ensemble_{first}"


def lead_member(members: Sequence[Path], cfg: TrainConfig) -> str:
    """The member the student starts from (and whose moves its teacher makes): m0, or
    with ``cfg.distill_init`` ``best`` or ``scratch`` the member whose kept model has the best val
    figure of its own run (``select.json``, ``cfg.select_metric``; ties: the first)."""
    if cfg.distill_init == "lead":
        return members[0].name
    scores = []
    for m in members:
        best = read_json(m / "select.json", {}).get("best") or {}
        value = best.get(cfg.select_metric)
        scores.append(float(value) if isinstance(value, (int, float)) else float("-inf"))
    return members[max(range(len(members)), key=lambda i: (scores[i], -i))].name


def evaluate_ensemble(
    ens: Path, camera: str, params: Mapping[str, Any], cfg: TrainConfig
) -> dict[str, Any]:
    """Calibrate and evaluate the ensemble of ``ens`` as train does a run.

    The operating point is chosen as the members' are (``cfg.operating_point`` on the
    held-out val frames of the training camera ``params``, never test); the evaluation
    (on held-out frames, :func:`inspector.train.select.eval_params`;
    ``final_eval_episodes``) is at that point, or none without held-out frames. report.json
    (its ``operating_point`` section), report.png; its CPU time goes to ``ens/cost.json``.
    The point is stored as ``ens/operating_point.json`` for these member files, so
    ``export`` of the ensemble directory carries it into the ``.onnx``.
    """
    from inspector.policy.ensemble import EnsemblePolicy
    from inspector.train.distill import ensemble_policy
    from inspector.train.evaluate import evaluate, write_report
    from inspector.train.select import eval_params, no_eval_doc

    cpu0 = cpu_seconds()
    policy = ensemble_policy(ens, calibrated=False)
    op = _ensemble_operating_point(policy, camera, params, cfg)
    if op.get("ok_bias") or op.get("max_zoom") is not None:
        policy = EnsemblePolicy(policy.members, ok_bias=op["ok_bias"], max_zoom=op.get("max_zoom"))
    _store_operating_point(ens, policy, op)
    members = list(read_json(ens / "ensemble.json", {}).get("members", []))
    ev_params, ev_source = eval_params(camera, params, cfg)
    if ev_params is None:  # no held-out frames: no figure on the training frames
        result = {"ensemble": members, "scan": dict(policy.meta.scan), "operating_point": op,
                  "ok_bias": float(op.get("ok_bias", 0.0)), "eval_frames": None,
                  "evaluation": no_eval_doc(ev_source)}  # fmt: skip
        write_json(ens / "report.json", result)
    else:
        n = cfg.final_eval_episodes
        result, kept = evaluate(policy, camera, ev_params, None if n is None else max(1, n), keep=6)
        result["ensemble"] = members
        result["scan"] = dict(policy.meta.scan)
        result["ok_bias"] = float(op.get("ok_bias", 0.0))
        result["operating_point"] = op
        result["evaluation"] = {"ran": True, "why": ev_source}
        write_report(result, kept, ens / "report.json", ens / "report.png")
    write_json(ens / COST_FILE, {"name": "ensemble", "cpu_s": round(cpu_seconds() - cpu0, 2)})
    return result


def _ensemble_operating_point(
    policy: Any, camera: str, params: Mapping[str, Any], cfg: TrainConfig
) -> dict[str, Any]:
    """The ensemble's operating point on the val frames, as report.json's section."""
    from inspector.train.calibration import choose_operating_point, goal_of
    from inspector.train.select import frames_doc, val_params

    val, source = val_params(camera, params, cfg)
    if val is None or cfg.operating_point == "none":
        why = "operating_point: none" if val is not None else f"no val frames ({source})"
        return {"ok_bias": 0.0, "why": f"not chosen: {why}", "frames": None}
    try:
        cal = choose_operating_point(policy, camera, val, cfg.select_episodes, *goal_of(cfg))
    except InspectorError as exc:  # e.g. val frames of one kind only
        return {"ok_bias": 0.0, "why": f"not chosen: {exc}", "frames": None}
    return cal.section(frames_doc(camera, val, cal.frames, source))


def _store_operating_point(ens: Path, policy: Any, op: Mapping[str, Any]) -> None:
    """``ens/operating_point.json`` for the members' model files (none where no point
    was chosen: an old one would name other files or another choice)."""
    from inspector.policy.ensemble import ensemble_sha256
    from inspector.policy.operating_point import FILE, OperatingPoint

    (ens / FILE).unlink(missing_ok=True)
    if op.get("frames") is None:
        return
    shas = [m.meta.model_sha256 for m in policy.members]
    OperatingPoint(
        ok_bias=float(op["ok_bias"]),
        objective=str(op["objective"]),
        target=op.get("target"),
        model_sha256=ensemble_sha256(shas),
        frames=int(op["frames"]["count"]),
        source=" ".join(
            [str(op["frames"]["camera"]), *(f"{k}={v}" for k, v in op["frames"]["params"].items())]
        ),
        at_bias=dict(op.get("at_bias") or {}),
        at_zero=dict(op.get("at_zero") or {}),
        max_zoom=op.get("max_zoom"),
        depths=list(op.get("depths") or []),
        confidence=op.get("confidence"),
    ).write(ens)


#: report.json keys of the table, and their headings.
COLUMNS = (
    ("accuracy", "accuracy"),
    ("balanced_accuracy", "balanced"),
    ("defect_recall", "defect recall"),
    ("false_alarm_rate", "false alarms"),
    ("defect_auroc", "AUROC"),
    ("mean_steps", "steps"),
    ("pixel_fraction", "pixels"),
)


def summarise(
    out: Path,
    members: Sequence[str],
    student: Mapping[str, Any] | None = None,
    check: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Rows of members, ensemble and students: their report figures and CPU time.

    ``cpu_min`` is the row's own training (the ensemble: its evaluation), and
    ``cpu_min_to_deployable`` what it took to have that model: a member its own, the
    ensemble all members, a student all members, the ensemble's val check and every
    student distilled up to it. The kept student's row is ``student`` (``student``:
    :func:`inspector.train.students.distil_students`' section; default: ``student``
    alone); one not kept is ``<folder> (not kept)``.
    """
    rows = []
    member_cpu = 0.0
    for name in members:
        d = out / "members" / name
        cost = read_json(d / COST_FILE, {})
        member_cpu += cost.get("cpu_s", 0.0)
        rows.append(_row(name, d, cost, cost.get("cpu_s", 0.0)))
    ens_cost = read_json(out / "ensemble" / COST_FILE, {})
    rows.append(_row("ensemble", out / "ensemble", ens_cost, member_cpu))
    attempts = (student or {}).get("attempts") or [{"name": "student"}]
    kept = (student or {}).get("kept", "student")
    spent = member_cpu + float((check or {}).get("cpu_s") or 0.0)
    for a in attempts:
        cost = read_json(out / a["name"] / COST_FILE, {})
        spent += cost.get("cpu_s", 0.0)
        name = "student" if a["name"] == kept else f"{a['name']} (not kept)"
        rows.append(_row(name, out / a["name"], cost, spent))
    return {"rows": rows}


def _row(name: str, folder: Path, cost: Mapping[str, Any], to_deployable_s: float) -> dict:
    report = read_json(folder / "report.json", {})
    row: dict[str, Any] = {"name": name, "path": str(folder)}
    for key, _ in COLUMNS:
        row[key] = report.get(key)
    row["ok_bias"] = report.get("ok_bias")
    row["max_zoom"] = (report.get("operating_point") or {}).get("max_zoom")
    row["cpu_min"] = round(cost.get("cpu_s", 0.0) / 60.0, 2)
    row["cpu_min_to_deployable"] = round(to_deployable_s / 60.0, 2)
    row["attempts"] = cost.get("attempts")
    row["storage_mb"] = round(cost["storage_bytes"] / 2**20, 2) if "storage_bytes" in cost else None
    return row


def table_markdown(summary: Mapping[str, Any]) -> str:
    """The report table: one row per member, the ensemble and the student."""
    heads = ["model", *(h for _, h in COLUMNS), "search depth", "CPU-min", "CPU-min to deployable"]
    lines = ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
    for r in summary["rows"]:
        cells = [r["name"]]
        for key, _ in COLUMNS:
            v = r.get(key)
            cells.append("-" if v is None else f"{v:.3f}" if key != "mean_steps" else f"{v:.1f}")
        depth = "full" if r.get("max_zoom") is None else f"zoom {r['max_zoom']}"
        cells += [depth, f"{r['cpu_min']:.1f}", f"{r['cpu_min_to_deployable']:.1f}"]
        lines.append("| " + " | ".join(cells) + " |")
    asked = summary.get("asked", {})
    depth = summary.get("search_depth") or {}
    if depth:
        d = depth.get("search_depth")
        words = "every zoom level" if d == "full" else f"zoom level {d} at most"
        words = words if isinstance(d, int) or d == "full" else f"each model its own ({d})"
        why = depth.get("why")
        lines += ["", f"Search depth of the ensemble and the student: {words} ({why})."]
    chosen = summary.get("student") or {}
    if chosen.get("why"):
        lines += ["", f"Student kept: {chosen.get('kept')} ({chosen['why']})."]
    lines += [
        "",
        f"{asked.get('members')} members of {asked.get('timesteps')} steps (seeds"
        f" {asked.get('seed')}..), student distilled for {asked.get('distill_timesteps')}"
        " steps. Figures: each run's report.json (its own evaluation parts, each model at"
        " the operating point and search depth train chose for it on val, if any;"
        " search depth full: every zoom level, zoom N: the agent declares rather than"
        " look deeper than level N). CPU minutes:"
        " user+system of the processes that trained it, killed attempts and each run's"
        " final evaluation included; the ensemble's own CPU-min is its calibration and"
        " evaluation.",
    ]
    return "\n".join(lines) + "\n"
