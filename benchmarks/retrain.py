"""Retraining from collected footage: a synthetic-panel model retrained on magnetic-tile footage.

1. A base model is trained on synthetic LCD panels (classes ok, line, point), or
   ``--base RUN`` reuses one.
2. The magnetic-tile ``train`` split (splits.csv) is imported into a fresh footage
   store; the store holds out ~20 % of it by content hash for the gate.
3. ``retrain`` fine-tunes the base on the store's train part with the
   magnetic_tile profile (six classes). The class list changes, so the verdict
   head is re-initialised; the CNN, move and value heads start from the base.
4. Base and candidate are evaluated on the magnetic-tile ``test`` split (never
   imported). The base cannot name the tile classes, so the comparable figure is
   the two-class view (free against any defect); the candidate's six-class
   figures are reported too.

Usage: ``python -m benchmarks.retrain [--quick] [--base RUN] [--no-write]``
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _ensure_store_driver() -> None:
    from inspector.plugins import get_plugins

    reg = get_plugins().camera_drivers
    if "store" not in reg.names():  # until camera_drivers.footage_store is a default plugin
        from camera_drivers.footage_store import StoreCamera

        reg.add("store", StoreCamera, "camera_drivers.footage_store")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small step counts (minutes)")
    ap.add_argument("--base", help="reuse this base run instead of training one")
    ap.add_argument("--work", type=Path, help="work folder (default: a temporary one)")
    ap.add_argument("--no-write", action="store_true", help="do not write docs/benchmarks.md")
    args = ap.parse_args(argv)

    from benchmarks._report import table, write_section
    from inspector.datasets import magnetic_tile_root
    from inspector.footage.importers import import_footage
    from inspector.footage.store import FootageStore
    from inspector.train.config import TrainConfig
    from inspector.train.runner import train_run
    from inspector.train.torch_policy import load_any_policy
    from inspector.workflows.retrain import evaluate_all, retrain

    _ensure_store_driver()
    mt = magnetic_tile_root()
    if mt is None:
        print("magnetic-tile footage not found (set INSPECTOR_DATA)", file=sys.stderr)
        return 2
    work = args.work or Path(tempfile.mkdtemp(prefix="bench_retrain_"))
    work.mkdir(parents=True, exist_ok=True)
    base_steps, retrain_steps = (4096, 8192) if args.quick else (50_000, 100_000)
    cfg = TrainConfig(n_envs=2, n_steps=128, batch_size=128, n_epochs=2, final_eval_episodes=0)
    t0 = time.time()
    if args.base:
        base = Path(args.base)
    else:
        base = work / "base"
        train_run(
            str(ROOT / "reward_profiles" / "lcd_panel.yaml"),
            "synthetic",
            {"size": 256},
            base_steps,
            base,
            cfg,
            progress=False,
            evaluate_after=False,
        )
    t_base = time.time() - t0
    with FootageStore(work / "store", create=True) as store:
        imp = import_footage(store, mt / "splits.csv", "csv", split="train", progress=False)
        summary = store.summary()
    t0 = time.time()
    rep = retrain(
        work / "store",
        base,
        work / "out",
        timesteps=retrain_steps,
        profile=ROOT / "reward_profiles" / "magnetic_tile.yaml",
        cfg=cfg,
        registry=work / "registry",
        progress=False,
    )
    t_retrain = time.time() - t0
    test = {"path": str(mt), "manifest": "splits.csv", "split": "test"}
    base_t = evaluate_all(load_any_policy(base), "folder", test, truth_ok_class="free")
    cand_t = evaluate_all(load_any_policy(rep["candidate"]), "folder", test, truth_ok_class="free")
    keys = ("balanced_accuracy", "accuracy", "defect_recall", "false_alarm_rate")

    def f(v):
        return "n/a" if v is None else f"{v:.3f}"

    rows = [
        ["base (synthetic panels), ok vs defect"] + [f(base_t["binary"][k]) for k in keys],
        ["retrained, ok vs defect"] + [f(cand_t["binary"][k]) for k in keys],
        ["retrained, six classes"] + [f(cand_t["full"][k]) for k in keys],
    ]
    gate = rep["gate"]
    body = (
        f"Magnetic-tile test split ({cand_t['frames']} frames, never imported). Base: "
        f"{'given' if args.base else f'{base_steps} steps on synthetic 256 px panels'} "
        f"(classes ok, line, point). Footage: the train split, {imp.new} frames imported "
        f"({summary['splits'].get('train', 0)} train / {summary['splits'].get('heldout', 0)} "
        f"held out by hash). Retrained {rep['timesteps']} steps with the magnetic_tile profile.\n\n"
        + table(["model / view", *keys], rows)
        + f"\nInitialisation: {rep['initialisation']}.\n\n"
        f"The base cannot name the six tile classes, so its only comparable figures are "
        f"the two-class ones (free against any defect).\n\n"
        f"Gate on the store's held-out frames ({rep['heldout_frames']} frames, "
        f"{rep['comparison_view']} view): {'promoted' if rep['promoted'] else 'refused'}"
        f" ({'; '.join(gate['reasons'])}).\n\n"
        f"Wall time: base {t_base:.0f} s, retrain + gate {t_retrain:.0f} s.\n"
    )
    print(body)
    (work / "bench_retrain.json").write_text(
        json.dumps({"base_test": base_t, "candidate_test": cand_t, "report": rep}, default=str)
    )
    if not args.no_write:
        write_section("retrain", "Retraining from collected footage", body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
