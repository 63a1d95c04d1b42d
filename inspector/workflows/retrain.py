"""Retrain from a footage store, compare with the base on held-out frames, promote or refuse.

``retrain(footage, base, out)``:

1. reads the store's labelled frames; the ``train`` split trains, the ``heldout``
   split (by content hash) only evaluates;
2. fine-tunes with HybridPPO through the ``store`` camera driver. Same classes and
   scan settings as the base: the base initialises the weights and is the KL
   teacher. A changed class list: the glimpse CNN, the move logits and the value
   head are copied from the base, the verdict logits are re-initialised, and the
   KL teacher is the configured one (``scripted`` by default: KL on the move
   component only), because the base's verdict distribution is over other
   classes. Other scan settings: trained fresh. The report says which;
3. evaluates base and candidate on every held-out frame with the same greedy
   episode loop as ``eval``;
4. the gate: the candidate is exported to ONNX and registered only when its defect
   recall is at least ``base + min_recall_delta`` and its false-alarm rate at most
   ``base + max_false_alarm_delta``; otherwise the report says why.

When the base has other classes than the footage, ``eval``'s per-class metrics
cannot be computed for it; the comparison then uses the two-class view (the ok
class against any defect), where defect recall and false-alarm rate mean
exactly what they mean in ``eval``.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import math
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from inspector.errors import FootageError, InspectorError
from inspector.files import atomic_path, sha256_bytes, sha256_file, write_atomic
from inspector.footage.store import FootageStore, FrameRecord
from inspector.workflows.heldout import STORE_DRIVER, evaluate_all

log = logging.getLogger(__name__)

#: Metrics compared and drawn in the report.
COMPARED = ("accuracy", "balanced_accuracy", "defect_recall", "false_alarm_rate")


@dataclass(frozen=True)
class Gate:
    """The promotion gate, as allowed changes against the base on held-out frames.

    :param min_recall_delta: candidate defect recall - base defect recall must be at least
        this (0: not lower; -0.02 tolerates a two-point drop).
    :param max_false_alarm_delta: candidate false-alarm rate - base false-alarm rate must be
        at most this (0: not higher).

    Without an ok class (``ok_class: none``) there are no false alarms: the candidate's
    balanced accuracy (mean per-class recall) is held to ``min_recall_delta`` instead.
    """

    min_recall_delta: float = 0.0
    max_false_alarm_delta: float = 0.0

    def check(self, base: Mapping[str, Any], cand: Mapping[str, Any]) -> tuple[bool, list[str]]:
        """(passed, reasons): reasons say why it failed (or, when passed, what held).

        :param base: the base's metrics.
        :param cand: the candidate's metrics on the same frames.
        """
        if "ok_class" in cand and cand["ok_class"] is None:
            return self._check_classes(base, cand)
        reasons, ok = [], True
        br, cr = base.get("defect_recall"), cand.get("defect_recall")
        bf, cf = base.get("false_alarm_rate"), cand.get("false_alarm_rate")
        eps = 1e-9  # equal rates on the same frames must compare equal
        if br is None or cr is None:
            ok = False
            reasons.append("the held-out frames have no defect parts: defect recall unknown")
        elif cr - br < self.min_recall_delta - eps:
            ok = False
            reasons.append(
                f"defect recall {cr:.3f} is lower than the base's {br:.3f} "
                f"(change {cr - br:+.3f}, allowed {self.min_recall_delta:+.3f})"
            )
        else:
            reasons.append(f"defect recall {cr:.3f} vs base {br:.3f}: ok")
        if bf is None or cf is None:
            ok = False
            reasons.append("the held-out frames have no ok parts: false-alarm rate unknown")
        elif cf - bf > self.max_false_alarm_delta + eps:
            ok = False
            reasons.append(
                f"false-alarm rate {cf:.3f} is higher than the base's {bf:.3f} "
                f"(change {cf - bf:+.3f}, allowed {self.max_false_alarm_delta:+.3f})"
            )
        else:
            reasons.append(f"false-alarm rate {cf:.3f} vs base {bf:.3f}: ok")
        if ok:
            return True, reasons
        return False, [r for r in reasons if not r.endswith(": ok")]

    def _check_classes(
        self, base: Mapping[str, Any], cand: Mapping[str, Any]
    ) -> tuple[bool, list[str]]:
        """Classification only (no ok class, so no false alarms): balanced accuracy, the
        mean per-class recall, must not drop by more than ``min_recall_delta`` allows."""
        b, c = float(base["balanced_accuracy"]), float(cand["balanced_accuracy"])
        if c - b < self.min_recall_delta - 1e-9:
            return False, [
                f"no ok class: balanced accuracy (mean per-class recall) {c:.3f} is lower "
                f"than the base's {b:.3f} (change {c - b:+.3f}, allowed "
                f"{self.min_recall_delta:+.3f})"
            ]
        return True, [f"no ok class: balanced accuracy {c:.3f} vs base {b:.3f}: ok"]


def _partial_init(
    base_path: str, profile_path: Path, params: Mapping[str, Any], cfg: Any, out: Path
) -> tuple[Path, list[str]]:
    """A model for the new profile with every base weight whose shape fits; the verdict
    rows of the action head (and anything else that does not fit) stay freshly initialised.
    """
    import torch

    from inspector.profile import load_profile
    from inspector.train.runner import build_model, make_vec_env
    from inspector.train.torch_policy import load_trained

    small = cfg.replace(n_envs=1, vec_env="dummy", w_kd=0.0)
    env = make_vec_env(str(profile_path), STORE_DRIVER, params, small, False)
    try:
        model = build_model(env, load_profile(str(profile_path)), small, None, None)
        base, _, _ = load_trained(base_path)
        src = base.policy.state_dict()
        dst = model.policy.state_dict()
        fresh = []
        n_moves = int(env.action_space.nvec[0])  # the profile's action table
        same_table = int(base.action_space.nvec[0]) == n_moves
        with torch.no_grad():
            for k, v in dst.items():
                s = src.get(k)
                if s is not None and s.shape == v.shape:
                    v.copy_(s)
                elif (
                    k.startswith("action_net.")
                    and same_table
                    and s is not None
                    and s.shape[1:] == v.shape[1:]
                ):
                    v[:n_moves] = s[:n_moves]  # the move logits keep the base's scanning
                    fresh.append(f"{k} (verdict rows)")
                else:
                    fresh.append(k)
        model.policy.load_state_dict(dst)
        init = out / "init"
        init.mkdir(parents=True, exist_ok=True)
        model.save(str(init / "model.zip"))
        shutil.copyfile(profile_path, init / "profile.yaml")
        # The network is rebuilt from these when the model loads (nothing is unpickled).
        (init / "config.yaml").write_text(small.to_yaml())
    finally:
        env.close()
    return init, fresh


# -- the report --------------------------------------------------------------------------
def write_manifest(rows: Sequence[tuple[str, str, str]], path: Path) -> str:
    """Write ``frame_id,label,split`` rows; return the file's sha256."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["frame_id", "label", "split"])
    w.writerows(rows)
    data = buf.getvalue().encode()
    path.write_bytes(data)
    return sha256_bytes(data)


def plot_comparison(
    base: Mapping[str, Any], cand: Mapping[str, Any], title: str, out: Path
) -> None:
    """A bar chart of :data:`COMPARED` for base and candidate."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(COMPARED)
    bv = [base.get(k) if base.get(k) is not None else math.nan for k in names]
    cv = [cand.get(k) if cand.get(k) is not None else math.nan for k in names]
    x = np.arange(len(names))
    fig, ax = plt.subplots(figsize=(7, 3.6), dpi=100)
    ax.bar(x - 0.2, bv, 0.4, label="base", color="#888888")
    ax.bar(x + 0.2, cv, 0.4, label="candidate", color="#2b7bba")
    for xs, vals in ((x - 0.2, bv), (x + 0.2, cv)):
        for xi, v in zip(xs, vals):
            if not math.isnan(v):
                ax.text(xi, v + 0.01, f"{v:.2f}", ha="center", fontsize=7)
    ax.set_xticks(x, [n.replace("_", " ") for n in names], fontsize=8)
    ax.set_ylim(0, 1.1)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    with atomic_path(out) as tmp:
        fig.savefig(tmp)
    plt.close(fig)


# -- retrain -----------------------------------------------------------------------------
def retrain(
    footage: str | Path,
    base: str | Path,
    out: str | Path,
    *,
    timesteps: int = 50_000,
    profile: str | Path | None = None,
    cfg: Any = None,
    registry: str | Path | None = None,
    gate: Gate | None = None,
    label_map: Mapping[str, str] | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Retrain ``base`` on a footage store; compare, gate, promote. See the module docstring.

    :param footage: the store folder.
    :param base: the base run directory or its ``model.zip``.
    :param out: the output folder (candidate run, report, ONNX).
    :param timesteps: environment steps of fine-tuning.
    :param profile: reward profile of the candidate (default: the base's).
    :param cfg: a :class:`inspector.train.config.TrainConfig` (default settings otherwise).
    :param registry: the model registry folder; None: export but register nowhere.
    :param gate: promotion thresholds.
    :param label_map: rename store labels for the profile (``free`` -> ``ok``).
    :param progress: show training progress.
    :returns: the report (also written to ``out/retrain_report.json``).
    :raises InspectorError: no store, too few labelled frames, labels outside the profile.
    """
    from inspector.profile import load_profile
    from inspector.train.config import TrainConfig
    from inspector.train.torch_policy import load_trained

    gate = gate or Gate()
    cfg = cfg or TrainConfig()
    footage, out = Path(footage), Path(out)
    base_path = Path(base)
    _, base_profile, base_sha = load_trained(base_path)
    base_dir = base_path if base_path.is_dir() else base_path.parent
    profile_path = Path(profile) if profile is not None else base_dir / "profile.yaml"
    if not profile_path.is_file():
        raise InspectorError(f"profile not found: {profile_path}")
    prof = load_profile(str(profile_path))
    lmap = dict(label_map or {})
    train_recs, held_recs, manifest_rows = _labelled_records(footage, prof, lmap)
    out.mkdir(parents=True, exist_ok=True)
    manifest_path = out / "footage_manifest.csv"
    manifest_sha = write_manifest(manifest_rows, manifest_path)
    params = _store_params(footage, lmap, "train")

    same_classes = tuple(base_profile.classes) == tuple(prof.classes)
    result, fresh, init_note = _train_candidate(
        base_path, base_profile, prof, profile_path, params, timesteps, out, cfg, progress
    )
    comparison = _compare(
        base_path, result.model_path, _store_params(footage, lmap, "heldout"), prof, gate
    )
    report: dict[str, Any] = {
        "footage": str(footage.resolve()),
        "base": str(base_path),
        "base_model_sha256": base_sha,
        "candidate": str(result.model_path),
        "candidate_model_sha256": sha256_file(result.model_path),
        "profile": str(profile_path),
        "profile_sha256": prof.sha256,
        "timesteps": result.timesteps,
        "train_frames": len(train_recs),
        "heldout_frames": len(held_recs),
        "footage_manifest": str(manifest_path),
        "footage_manifest_sha256": manifest_sha,
        "classes_changed": not same_classes,
        "initialisation": init_note,
        "reinitialised": fresh,
        **comparison,
        "promoted": False,
        "onnx": None,
        "registry_version": None,
    }
    _conclude(report, result.model_path, out, registry, prof)
    return report


def _train_candidate(
    base_path: Path,
    base_profile: Any,
    prof: Any,
    profile_path: Path,
    params: dict[str, Any],
    timesteps: int,
    out: Path,
    cfg: Any,
    progress: bool,
) -> tuple[Any, list[str], str]:
    """Fine-tune the candidate into ``out/candidate``: (the train result, the parts
    re-initialised, the note on where it started)."""
    from inspector.train.runner import train_run

    cand_dir = out / "candidate"
    if cand_dir.exists():
        shutil.rmtree(cand_dir)  # a retrain starts from the base, never from a stale candidate
    init_from, teacher, fresh, init_note = _initialisation(
        base_path, base_profile, prof, profile_path, params, cfg, out
    )
    log.warning("retrain: %s", init_note)
    result = train_run(
        str(profile_path),
        STORE_DRIVER,
        params,
        timesteps,
        cand_dir,
        cfg,
        teacher_path=teacher,
        progress=progress,
        evaluate_after=False,
        init_from=init_from,
    )
    return result, fresh, init_note


def _store_params(footage: Path, lmap: Mapping[str, str], split: str) -> dict[str, Any]:
    """The footage-store driver's parameters for one split of ``footage``."""
    params: dict[str, Any] = {"path": str(footage.resolve()), "split": split}
    if lmap:
        params["label_map"] = lmap
    return params


def _compare(
    base_path: Path, cand_path: Path, held_params: dict[str, Any], prof: Any, gate: Gate
) -> dict[str, Any]:
    """Base and candidate on the held-out frames, and the gate's verdict (report entries).

    Per class when both models name the profile's classes, else ok vs defect.
    """
    from inspector.train.torch_policy import load_any_policy

    base_pol = load_any_policy(base_path)
    cand_pol = load_any_policy(cand_path)
    base_eval = evaluate_all(base_pol, STORE_DRIVER, held_params, truth_ok_class=prof.ok_class)
    cand_eval = evaluate_all(cand_pol, STORE_DRIVER, held_params, truth_ok_class=prof.ok_class)
    view = "full" if base_eval["full"] is not None and cand_eval["full"] is not None else "binary"
    passed, reasons = gate.check(base_eval[view], cand_eval[view])
    return {
        "comparison_view": view,
        "base_metrics": base_eval,
        "candidate_metrics": cand_eval,
        "gate": {
            "min_recall_delta": gate.min_recall_delta,
            "max_false_alarm_delta": gate.max_false_alarm_delta,
            "passed": passed,
            "reasons": reasons,
        },
    }


def _labelled_records(
    footage: Path, prof: Any, lmap: Mapping[str, str]
) -> tuple[list[FrameRecord], list[FrameRecord], list[Any]]:
    """The store's labelled train and held-out frames and their manifest rows.

    :raises FootageError: a split is empty, or a label is not a class of ``prof``.
    """
    with FootageStore(footage) as store:
        train_recs = store.records(split="train", labelled_only=True)
        held_recs = store.records(split="heldout", labelled_only=True)
        summary = store.summary()
        manifest_rows = store.manifest_rows(train_recs + held_recs)
    if not train_recs:
        raise FootageError(f"{footage}: no labelled frames in the train split")
    if not held_recs:
        raise FootageError(
            f"{footage}: no labelled held-out frames to compare on (about "
            f"{summary['heldout_threshold'] / 256:.0%} of frames are held out by hash)"
        )
    labels = {lmap.get(r.label, r.label) for r in train_recs + held_recs}
    unknown = sorted(labels - set(prof.classes))
    if unknown:
        raise FootageError(
            f"footage labels {', '.join(unknown)} are not classes of profile {prof.name!r} "
            f"({', '.join(prof.classes)}); pass --profile with those classes or --label-map"
        )
    return train_recs, held_recs, manifest_rows


def _initialisation(
    base_path: Path,
    base_profile: Any,
    prof: Any,
    profile_path: Path,
    params: dict[str, Any],
    cfg: Any,
    out: Path,
) -> tuple[str | None, str | None, list[str], str]:
    """Where the candidate starts: (init_from, KL teacher, re-initialised parts, note).

    The base's weights and the base as teacher when classes and scan agree; the base's
    CNN, move and value heads with a fresh verdict head when only the classes changed;
    nothing from the base when the scan differs.
    """
    same_scan = asdict(base_profile.scan) == asdict(prof.scan)
    same_classes = tuple(base_profile.classes) == tuple(prof.classes)
    if same_classes and same_scan:
        return (
            str(base_path),
            str(base_path),
            [],
            "weights from the base; the base is the KL teacher",
        )
    if same_scan:
        init_dir, fresh = _partial_init(str(base_path), profile_path, params, cfg, out)
        note = (
            f"class list changed ({', '.join(base_profile.classes)} -> "
            f"{', '.join(prof.classes)}): verdict head re-initialised, CNN, move and value "
            f"heads from the base; KL teacher: {cfg.teacher} (move component only)"
        )
        return str(init_dir), None, fresh, note
    note = f"scan settings differ from the base: trained fresh; KL teacher: {cfg.teacher}"
    return None, None, ["all (scan settings differ from the base)"], note


def _conclude(
    report: dict[str, Any], model_path: Path, out: Path, registry: str | Path | None, prof: Any
) -> None:
    """Promote the candidate when it passed the gate, plot the comparison, write the report."""
    view = report["comparison_view"]
    base_m = report["base_metrics"][view]
    cand_m = report["candidate_metrics"][view]
    if report["gate"]["passed"]:
        _promote(report, model_path, out, registry, prof, base_m, cand_m)
    title = "held-out frames, " + ("per-class" if view == "full" else "ok vs defect") + " view"
    plot_comparison(base_m, cand_m, title, out / "retrain_report.png")
    write_atomic(out / "retrain_report.json", json.dumps(report, indent=2, default=_json_default))


def _promote(
    report: dict[str, Any],
    model_path: Path,
    out: Path,
    registry: str | Path | None,
    prof: Any,
    base_m: Any,
    cand_m: Any,
) -> None:
    """Export the candidate that passed the gate and register it; fills ``report``."""
    from inspector.export.onnx import export_onnx
    from inspector.footage import registry as reg

    onnx = export_onnx(model_path, out / "candidate.onnx")
    report["onnx"] = str(onnx)
    if registry is not None:
        doc = reg.register(
            registry,
            onnx,
            metrics=cand_m,
            profile_sha256=prof.sha256,
            footage_manifest=Path(report["footage_manifest"]),
            base=report["base"],
            base_metrics=base_m,
            notes="; ".join(report["gate"]["reasons"]),
            extra={
                "comparison_view": report["comparison_view"],
                "classes": list(prof.classes),
                "profile_name": prof.name,
                "source_model_sha256": report["candidate_model_sha256"],
            },
        )
        report["registry_version"] = doc["version"]
        report["registry_path"] = doc["path"]
    report["promoted"] = True


def _json_default(o: Any) -> Any:
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)
