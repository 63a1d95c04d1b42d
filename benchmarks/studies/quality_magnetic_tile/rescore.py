"""Add the goal's operating point to saved results from their saved models."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from benchmarks.harness import ROOT, write_json
from benchmarks.studies.quality_magnetic_tile.baselines import baseline_operating_point, make_net
from benchmarks.studies.quality_magnetic_tile.data import Sample
from benchmarks.studies.quality_magnetic_tile.operating import agent_operating_point
from benchmarks.studies.quality_magnetic_tile.runs import runs
from benchmarks.studies.quality_magnetic_tile.settings import PROFILE, fmt


def rescore(
    out_dir: Path,
    runs_dir: Path,
    seed: int,
    budget_s: float,
    root: Path,
    frames: Callable[[str], list[Sample]],
    force: bool = False,
) -> None:
    """Add :func:`operating_point` to the saved results of ``seed`` at ``budget_s`` whose models
    are still there (agents: their ``best/`` run; baselines: ``<method>_s<seed>_<budget>s.pt``,
    or ``<method>_s<seed>.pt`` as saved at the default budget before budgets varied)."""
    import torch

    from inspector.profile import load_profile

    profile = load_profile(PROFILE)
    classes, ok_class = list(profile.classes), profile.ok_class
    suffix = f"_s{seed}_{budget_s:.0f}s"  # the runs' model files are named so
    for saved_run in runs(out_dir, seed=int(seed), budget_s=round(budget_s)):
        path, r, key = saved_run.path, saved_run.data, saved_run.config["key"]
        if r.get("operating_point") and not force:
            continue
        if key.startswith("agent"):
            model = ROOT / r.get("model", "")
            if not (model / "model.zip").is_file():
                print(f"rescore: {key}: no saved model at {model}; left as it is")
                continue
            op = agent_operating_point(model, root)
        elif key in ("tiling", "fullframe"):
            pt = runs_dir / f"{key}{suffix}.pt"
            legacy = runs_dir / f"{key}{suffix.rsplit('_', 1)[0]}.pt"  # before budgets varied
            if not pt.is_file() and suffix.endswith("_1200s") and legacy.is_file():
                pt = legacy
            if not pt.is_file():
                print(f"rescore: {key}: no saved net {pt}; left as it is")
                continue
            net = make_net(len(classes))
            net.load_state_dict(torch.load(pt, map_location="cpu", weights_only=True))
            net.eval()
            val, test = frames("val"), frames("test")
            thr = r.get("threshold", 0.5)
            op = baseline_operating_point(key, net, val, test, classes, ok_class, thr)
        else:
            continue
        saved, now = r["test"]["balanced_accuracy"], op["test_as_run"]["balanced_accuracy"]
        if abs(saved - now) > 1e-6:
            print(
                f"rescore: {key}: its saved model gives test balanced accuracy {now:.4f}, the"
                f" saved result {saved:.4f}: not the model behind it; left as it is"
            )
            continue
        r["operating_point"] = op
        write_json(path, r)
        t = op.get("test") or {}
        print(
            f"rescore: {key}: test AUROC {fmt(op['auroc_test'])}; at val false alarms <="
            f" {op['false_alarm_ceiling']:g}: recall {fmt(t.get('defect_recall'))}, false"
            f" alarms {fmt(t.get('false_alarm_rate'))}"
        )
