"""The benchmark scripts run end to end at a tiny size and produce positive figures.

Speed itself is never asserted here (it is measured by the scripts, as ratios in
one run); these tests only keep the measuring code from rotting. They call each
script's ``measure`` and ``report`` and never write docs/benchmarks.md.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from benchmarks.studies.learning_efficiency import arms, cli, outcomes, probes, runs, tasks
from inspector.train.config import TrainConfig

# The learning-efficiency study's modules, as one namespace (the tests predate its split).
le = SimpleNamespace(
    **{
        name: getattr(mod, name)
        for mod in (tasks, arms, probes, outcomes, cli)
        for name in dir(mod)
        if not name.startswith("__")
    }
)


def save_run(folder, arm, seed, budget, doc, **options):
    """Save ``doc`` as a run of the task in use, with its configuration."""
    config = runs.run_config("test", arm, seed, budget, runs.arm_variant(arm, **options))
    runs.save(runs.run_path(folder, config), config, doc)


TINY = TrainConfig(
    n_envs=2,
    n_steps=16,
    batch_size=16,
    n_epochs=1,
    cnn_channels=4,
    features_dim=16,
    net_arch=[16],
    bc_samples=0,
)


@pytest.fixture(autouse=True)
def one_torch_thread():
    """One torch thread, as the scripts use: tiny nets gain nothing from more."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _positive(*values: float) -> None:
    for v in values:
        assert math.isfinite(v) and v > 0, v


def test_env_benchmark_measures_env_and_baseline():
    from benchmarks.speed import env

    b = env.measure(size=128, n_steps=150, repeats=1, n_frames=3)
    _positive(
        b.synthetic, b.prerendered, b.step_only, b.reset_per_episode, b.frame_per_episode, b.bare
    )
    assert b.episodes >= 1
    body, _ok = env.report(b, "test", None)
    assert "steps/s" in body


def test_env_benchmark_replays_the_envs_crops():
    from benchmarks.speed import env
    from inspector.env import InspectionEnv

    e = InspectionEnv(env.PROFILE, "synthetic", {"size": 128, "seed": 0})
    actions = env.random_actions(60, len(e.classes))
    crops = env.record_crops(e, actions)
    # One crop per reset at least, and every crop lies inside the frame.
    assert sum(c[1] for c in crops) >= 1
    assert all(0 <= x0 < x1 <= 128 and 0 <= y0 < y1 <= 128 for _, _, x0, y0, x1, y1 in crops)


def test_rrm_benchmark_times_every_method_and_the_update():
    from benchmarks.speed import rrm

    b = rrm.measure(n_steps=16, n_envs=2, repeats=1, inner=1, size=128, cfg=TINY)
    assert set(b.pipeline) == {"none", *rrm.METHODS}
    _positive(b.update, b.collect, *b.pipeline.values(), *(b.ratio(m) for m in rrm.METHODS))
    body, _ok = rrm.report(b, TINY)
    assert "learned" in body


def test_training_benchmark_times_both_learners():
    from benchmarks.speed import training

    b = training.measure(timesteps=32, repeats=1, size=128, cfg=TINY)
    _positive(b.hybrid, b.plain, b.ratio)
    body, _ok = training.report(b, TINY)
    assert "plain SB3 PPO" in body


@pytest.mark.filterwarnings("ignore")
def test_inference_benchmark_times_every_backend(tmp_path):
    from benchmarks.speed import inference

    b = inference.measure(
        tmp_path,
        train_steps=32,
        n_glimpse=10,
        n_parts=2,
        n_obs=16,
        size=128,
        cfg=TINY,
        thread_modes=(1,),
    )
    assert [x.name for x in b.backends] == ["torch eager", "ORT fp32", "ORT int8"]
    for x in b.backends:
        _positive(*x.glimpse, *x.part, *x.worst)
        assert all(1 <= s <= b.budget for s in x.part_steps)
    assert 0.0 <= b.agreement["action_agreement"] <= 1.0
    assert b.agreement["observations"] == 16
    assert [k for k, _ in b.ensembles] == [2, 4]
    for _, x in b.ensembles:
        _positive(*x.glimpse, *x.worst)
    body, _ok = inference.report(b)
    assert "int8" in body
    assert "Verdict ensembles" in body and "| 4 |" in body


def test_learning_efficiency_pieces_run_at_a_tiny_size():
    assert le.current().name == le.DEFAULT_TASK == "quadrants"
    prof, _, plain = le.arm_setup("a")
    assert plain and prof.scan.glimpse == 64 and prof.scan.zoom_levels == 2
    assert prof.step_budget == le.current().step_budget == 16
    # The trainer control (g): (a)'s rewards, (b)'s trainer with no extra loss.
    prof_g, hybrid_g, plain_g = le.arm_setup("g")
    assert [t.term for t in prof_g.terms] == [t.term for t in prof.terms] == ["correct_class"]
    assert not plain_g and hybrid_g["w_sl"] == hybrid_g["w_kd"] == 0.0
    assert le.arm_setup("b")[1]["w_sl"] == 0.0 and set(le.MAIN_ARMS) < set(le.ARMS)
    with pytest.raises(SystemExit):
        le.main(["--arms", "az", "--report-only"])
    # The outcome-only control (h): (b)'s profile less its process terms, nothing else.
    prof_b, prof_h = le.arm_setup("b")[0], le.arm_setup("h")[0]
    assert {t.term for t in prof_b.terms} - {t.term for t in prof_h.terms} == {
        "focus_defect",
        "step_cost",
    }
    assert prof_h.rrm == prof_b.rrm
    # Verdict payoffs: the sparse profile pays 1 for the right verdict and 0 otherwise.
    pay = le.verdict_payoffs("a", parts=12)
    m = np.asarray(pay["matrix"])
    seen = np.asarray(pay["prior"]) > 0
    assert np.allclose(np.diag(m)[seen], 1.0) and np.allclose(m - np.diag(np.diag(m)), 0.0)
    assert sum(pay["prior"]) == pytest.approx(1.0)
    pay_b = le.verdict_payoffs("b", parts=12)
    mb = np.asarray(pay_b["matrix"])
    ok, line = pay_b["classes"].index("ok"), pay_b["classes"].index("line")
    assert mb[ok, line] < 0 < mb[line, line]  # a false alarm costs, a found line pays
    runs = [
        {"arm": arm, "curve": [{"accuracy": acc}]}
        for arm, acc in (("a", 0.5), ("g", 0.6), ("g", 0.4), ("b", 0.3))
    ]
    assert le.control_notes(runs) == [
        "Control (g), (a)'s sparse rewards through (b)'s trainer (HybridPPO, RRM buffer):"
        " final accuracy 0.500 (median), (a) 0.500."
    ]
    note = le.payoff_note({"a": pay, "b": pay_b})
    assert "(a) constant ok" in note and "every part right +1.00" in note
    r = le.run_one("b", 0, 512, eval_every=512, eval_parts=3, n_envs=2)
    assert r["curve"] and 0.0 <= r["curve"][-1]["accuracy"] <= 1.0
    assert le.results_dir("quick").name == "quick_quadrants"
    # The first task: every option of the full stack (the overview evidence needs the
    # overview and the glimpse of one size, as there).
    le.use_task("grid16")
    try:
        _pieces_at_a_tiny_size(le)
    finally:
        le.use_task(le.DEFAULT_TASK)


def _pieces_at_a_tiny_size(le):
    assert le.results_dir("quick").name == "quick"
    assert le.arm_setup("b")[0].scan.glimpse == 32
    ceiling = le.search_ceiling(4)
    assert 0.0 <= ceiling["accuracy"] <= 1.0 and ceiling["mean_steps"] >= 1
    vis = le.point_visibility(frames=60)
    assert vis["points"] > 0
    for k in ("local", "grid"):
        assert 0.0 <= vis[k]["recall"] <= 1.0 and vis[k]["point_max_median"] > 0
    probe = le.perception_probe(samples=300, epochs=1)
    assert probe["samples"] >= 300
    for k in ("fast", "fine"):
        assert 0.0 <= probe[k]["accuracy"] <= 1.0 and 0.0 <= probe[k]["false_alarm"] <= 1.0
    r = le.run_one(
        "e", 0, 1024, eval_every=512, eval_parts=4, n_envs=2, bc_samples=256,
        balanced_verdict=True, perception=64, critic_warmup=512, freeze_perception=True,
        weights=(0.5, 0.2, 0.3), memory=6, evidence=True, all_levels=True,
        overview_evidence=True, calibrate=6,
    )  # fmt: skip
    steps = [c["steps"] for c in r["curve"]]
    assert r["balanced_verdict"] and r["bc_samples"] == 256 and r["perception_samples"] == 64
    assert r["perception_frozen"] and r["weights"] == [0.5, 0.2, 0.3] and r["memory"] == 6
    assert r["evidence"] and r["overview_evidence"] and r["perception_levels"] == "all"
    # The cloned steps and the crops count: the first evaluation comes after both.
    assert steps[0] == 256 + 64 and steps == sorted(steps)
    for c in r["curve"]:
        assert 0.0 <= c["accuracy"] <= 1.0 and 0.0 <= c["native_share"] <= 1.0
        cal = c["calibrated"]
        assert 0.0 <= cal["accuracy"] <= 1.0 and -20.0 <= cal["ok_bias"] <= 20.0
        assert set(cal["per_class_recall"]) == {"ok", "line", "point"}
    assert r["calibrate_parts"] == 6
    body, med = le.summarise([r], 0.9, 1024)
    assert "(e)" in body and med["e"] == (le.steps_to(r["curve"], 0.9) or 1024)


def test_learning_efficiency_variants_table_groups_saved_full_stack_runs(tmp_path):
    def run(seed, accs):
        curve = [{"steps": 1000 * (i + 1), "accuracy": a, "mean_steps": 5.0, "native_share": 0.5,
                  "per_class_recall": {"ok": 1.0, "line": 0.5, "point": 0.25}}
                 for i, a in enumerate(accs)]  # fmt: skip
        return {"arm": "e", "seed": seed, "bc_samples": 1000, "curve": curve}

    save_run(tmp_path, "e", 0, 4096, run(0, [0.5, 0.95]), bc_samples=1000)
    save_run(tmp_path, "e", 1, 4096, run(1, [0.5, 0.6]), bc_samples=1000)
    pp = dict(bc_samples=1000, fine_cnn=True, perception=500, freeze_perception=True)
    save_run(tmp_path, "e", 0, 4096, run(0, [0.7]), **pp)
    save_run(tmp_path, "a", 0, 4096, run(0, [0.99]))  # not arm e
    save_run(tmp_path, "e", 0, 8192, run(0, [0.99]), bc_samples=1000)  # another budget
    body, rows = le.variants_table(tmp_path, 4096, 0.9)
    assert [r["seeds"] for r in rows] == [[0, 1], [0]]
    plain, pp = rows
    # Seed 0 reached 90 % at 2,000 steps, seed 1 never (counts as the budget).
    assert plain["reached"] == 1 and plain["median_steps"] == (2000 + 4096) / 2
    assert plain["after_pretraining"] == 0.5 and plain["best"] == (0.95 + 0.6) / 2
    assert "perception pretraining on 500 crops" in pp["variant"] and pp["final"] == 0.7
    assert "glimpse CNN frozen" in pp["variant"]
    assert le.describe_variant("_w0.3-0.2-0.5") == "hybrid weights 0.3 / 0.2 / 0.5"
    assert le.describe_variant("_fine_m8") == "full-resolution glimpse CNN, 8 remembered glimpses"
    assert le.describe_variant("_ev") == "per-glimpse evidence head"
    assert le.describe_variant("_pp8000_ms_ev_ov") == (
        "perception pretraining on 8,000 crops, crops from every zoom level,"
        " per-glimpse evidence head, evidence on the overview"
    )
    assert body.count("\n") == 4  # header, rule, two rows
    assert "calibrated" not in plain  # runs without --calibrate: no calibrated figures


def test_learning_efficiency_counts_calibrated_accuracy_only_where_it_was_measured(tmp_path):
    def point(steps, raw, cal):
        c = {"steps": steps, "accuracy": raw, "mean_steps": 5.0, "native_share": 0.5,
             "per_class_recall": {"ok": 0.0, "line": 1.0, "point": 1.0}}  # fmt: skip
        if cal is not None:
            c["calibrated"] = {"ok_bias": 1.5, "accuracy": cal, "per_class_recall": {}}
        return c

    curve = [point(1000, 0.6, None), point(2000, 0.65, 0.92), point(3000, 0.62, 0.88)]
    assert le.steps_to(curve, 0.9) is None
    assert le.steps_to(curve, 0.9, calibrated=True) == 2000
    run = {"arm": "e", "seed": 0, "bc_samples": 1000, "calibrate_parts": 150, "curve": curve}
    save_run(tmp_path, "e", 0, 4096, run, bc_samples=1000, calibrate=150)
    run1 = {**run, "seed": 1, "curve": [point(1000, 0.5, 0.7), point(4000, 0.5, 0.8)]}
    save_run(tmp_path, "e", 1, 4096, run1, bc_samples=1000, calibrate=150)
    body, (row,) = le.variants_table(tmp_path, 4096, 0.9)
    assert row["reached"] == 0 and row["variant"].endswith("ok bias calibrated on 150 other parts")
    cal = row["calibrated"]
    # Seed 0 reached 90 % calibrated at 2,000 steps, seed 1 never (the budget).
    assert cal["reached"] == 1 and cal["median_steps"] == (2000 + 4096) / 2
    assert cal["best"] == (0.92 + 0.8) / 2 and cal["final"] == (0.88 + 0.8) / 2
    assert "3,048 (cap), 1/2, 0.860, 0.840" in body


def test_learning_efficiency_ratio_notes_bound_the_ratio_when_the_baseline_misses():
    missed = le.ratio_notes({"a": 32768, "e": 16384}, {"a": False, "e": True}, 0.9, 32768)
    assert len(missed) == 1 and "at least 2.0x fewer steps (goal: 8x)" in missed[0]
    both = le.ratio_notes(
        {"a": 32000, "b": 8000, "e": 4000}, {"a": True, "b": True, "e": True}, 0.9, 32768
    )
    assert "8.00x fewer steps (goal: 8x)" in both[0] and "2.00x" in both[1]
    none = le.ratio_notes({"a": 32768, "e": 32768}, {"a": False, "e": False}, 0.9, 32768)
    assert "undefined" in none[0]
    assert le.ratio_notes({"a": 1000}, {"a": True}, 0.9, 32768) == []


def test_learning_efficiency_notes_a_longer_sparse_run_against_the_full_stack(tmp_path):
    def run(seed, accs, every):
        curve = [{"steps": every * (i + 1), "accuracy": a, "mean_steps": 1.0,
                  "native_share": 0.0, "per_class_recall": {"ok": 1.0, "line": 0.7, "point": 0.0}}
                 for i, a in enumerate(accs)]  # fmt: skip
        return {"arm": "a", "seed": seed, "curve": curve}

    save_run(tmp_path, "a", 0, 131072, run(0, [0.3, 0.56], 65536))
    save_run(tmp_path, "a", 1, 131072, run(1, [0.5, 0.95], 65536))
    save_run(tmp_path, "a", 0, 32768, run(0, [0.99], 32768))  # the table's budget
    notes = le.long_baseline_notes(tmp_path, 32768, 0.9, 16384.0)
    assert len(notes) == 2
    assert "never reached 90%" in notes[0] and "at least 8.0x" in notes[0]
    assert "reached 90% at 131,072 steps" in notes[1] and ": 8.0x" in notes[1]
    assert "best 0.560" in notes[0]
    assert le.long_baseline_notes(tmp_path, 32768, 0.9, None)[0].endswith("0.00).")
