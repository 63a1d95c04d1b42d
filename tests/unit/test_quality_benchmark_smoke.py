"""The magnetic-tile quality benchmark's building blocks, on a handful of frames.

No quality or timing thresholds: these keep the measuring code honest (tile
geometry, tile labels, threshold choice, metrics, resumable agent chunks), not
the figures it measures.
"""

from __future__ import annotations

import argparse
import json
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.studies.quality_magnetic_tile import (
    agent,
    baselines,
    cli,
    data,
    ensembles,
    operating,
    report,
    runs,
    tables,
)
from benchmarks.studies.quality_magnetic_tile import settings as study_settings

# The study's modules, as one namespace (the tests predate its split into modules).
q = SimpleNamespace(
    **{
        name: getattr(mod, name)
        for mod in (
            study_settings,
            data,
            baselines,
            operating,
            agent,
            ensembles,
            tables,
            report,
            cli,
        )
        for name in dir(mod)
        if not name.startswith("__")
    }
)


def save(folder, key, seed, budget, doc):
    """Save ``doc`` as the run ``key`` of ``seed`` at ``budget`` s, with its configuration."""
    method = "agent" if key.startswith("agent") else key
    config = {"mode": "test", "method": method, "key": key, "agent": None, "seed": seed,
              "budget_s": round(budget)}  # fmt: skip
    runs.save_run(runs.run_path(folder, config), config, doc)


CLASSES = ["free", "blowhole", "break", "crack", "fray", "uneven"]


@settings(max_examples=60, deadline=None)
@given(h=st.integers(1, 700), w=st.integers(1, 700))
def test_tiles_cover_every_pixel_and_stay_inside(h, w):
    origins = q.tile_origins(h, w)
    seen = np.zeros((max(h, q.TILE), max(w, q.TILE)), dtype=bool)
    for y, x in origins:
        assert 0 <= y and 0 <= x
        assert y + q.TILE <= max(h, q.TILE) and x + q.TILE <= max(w, q.TILE)
        seen[y : y + q.TILE, x : x + q.TILE] = True
    assert seen[:h, :w].all()
    # No more tiles than ceil(side / tile) per axis: exhaustive, not wasteful.
    assert len(origins) <= -(-max(h, 1) // q.TILE) * -(-max(w, 1) // q.TILE)
    tiles, pf = q.frame_tiles(np.zeros((h, w), dtype=np.uint8))
    assert tiles.shape == (len(origins), q.TILE, q.TILE)
    assert pf >= 1.0


def test_tile_labels_follow_the_mask():
    img = np.full((64, 96), 100, dtype=np.uint8)
    mask = np.zeros((64, 96), dtype=bool)
    mask[5:9, 40:44] = True  # 16 pixels inside tile (0, 32)
    mask[40, 70] = True  # one pixel: a sliver, left out
    x, y = q.tile_dataset(
        [q.Sample(img, mask, "crack")], CLASSES, "free", np.random.default_rng(0), jitter=0
    )
    # 6 grid tiles: one crack tile, one ambiguous (dropped), four free.
    assert len(x) == 5
    assert sorted(y.tolist()) == [0, 0, 0, 0, CLASSES.index("crack")]
    free = q.Sample(img, np.zeros_like(mask), "free")
    _, yf = q.tile_dataset([free], CLASSES, "free", np.random.default_rng(0))
    assert (yf == 0).all() and len(yf) == 6


def test_threshold_and_verdicts():
    sc = {
        "score": np.array([0.1, 0.2, 0.8, 0.9]),
        "cls": np.array([1, 1, 3, 1]),
        "pixel_fraction": np.ones(4),
    }
    labels = ["free", "free", "crack", "blowhole"]
    thr, bal = q.pick_threshold(sc, labels, CLASSES, "free")
    assert 0.2 <= thr < 0.8 and bal == 1.0
    assert q.tiling_verdicts(sc, thr, CLASSES, "free") == labels
    m = q.frame_metrics(CLASSES, "free", labels, ["free", "crack", "crack", "free"], [1.0] * 4)
    assert m["false_alarm_rate"] == 0.5 and m["defect_recall"] == 0.5
    assert m["pixel_fraction"] == 1.0
    assert q.goals_met(m) == {
        "defect_recall": False,
        "false_alarm_rate": False,
        "balanced_accuracy": False,
    }
    # A perfect result meets every goal (no false alarm at all is a rate of 0, not missing).
    perfect = q.frame_metrics(CLASSES, "free", labels, labels, [1.0] * 4)
    assert all(q.goals_met(perfect).values())


@pytest.fixture(scope="module")
def handful(magnetic_tile):
    val = q.load_split(magnetic_tile, "val")
    free = [s for s in val if s.label == "free"][:3]
    bad = [s for s in val if s.label != "free"][:3]
    return free + bad


def test_baselines_run_end_to_end(handful):
    import torch

    torch.set_num_threads(1)
    assert {s.label for s in handful} > {"free"}
    assert all(s.mask is not None and s.mask.shape == s.image.shape for s in handful)
    t = q.run_tiling(handful, handful, handful, 1.0, 0, CLASSES, "free", channels=4)
    assert t["test"]["episodes"] == len(handful)
    assert t["test"]["pixel_fraction"] >= 1.0
    assert t["fit"]["iterations"] > 0 and t["fit"]["history"]
    assert sum(t["train_tiles"].values()) > len(handful)
    f = q.run_fullframe(handful, handful, handful, 0.5, 0, CLASSES, "free", channels=4)
    assert f["test"]["episodes"] == len(handful)
    assert f["test"]["pixel_fraction"] == 0.0
    text = q.report({"tiling": q._public(t), "fullframe": q._public(f)}, "test", CLASSES, "free")
    assert "exhaustive tiling" in text and "full-frame" in text
    # The operating point's probabilities reproduce each method's own verdicts.
    for r in (t, f):
        op = r["operating_point"]
        assert op["test_as_run"]["balanced_accuracy"] == pytest.approx(
            r["test"]["balanced_accuracy"]
        )
        assert 0.0 <= op["auroc_test"] <= 1.0
        assert op["val"]["false_alarm_rate"] <= op["false_alarm_ceiling"]


@given(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=30), st.floats(0.01, 0.99))
@settings(max_examples=60, deadline=None)
def test_tiling_threshold_is_an_ok_bias(scores, thr):
    from inspector.policy.operating_point import verdicts_at

    rng = np.random.default_rng(len(scores))
    sc = {"score": np.asarray(scores), "cls": rng.integers(1, len(CLASSES), len(scores))}
    p = q.tiling_probs(sc, len(CLASSES), 0)
    assert np.allclose(p.sum(axis=1), 1.0)
    b = np.log(thr / (1 - thr))
    got = verdicts_at(p, np.zeros((len(CLASSES),) * 2), np.array([b]))[0]
    want = q.tiling_verdicts(sc, thr, CLASSES, "free")
    # Scores within rounding of the threshold may go either way.
    near = np.isclose(sc["score"], thr, atol=1e-9)
    assert [CLASSES[i] for i, n in zip(got, near) if not n] == [
        v for v, n in zip(want, near) if not n
    ]


@given(
    # float32 scores, as the nets give them.
    st.lists(
        st.tuples(st.floats(0.0, 1.0, width=32, allow_subnormal=False), st.booleans()),
        min_size=2,
        max_size=30,
    ),
)
@settings(max_examples=100, deadline=None)
def test_picked_threshold_survives_the_ok_bias_exactly(frames):
    # The threshold picked on a set of frames, re-expressed as the operating point's ok
    # bias logit(threshold), gives the same verdicts on those very frames: no frame sits
    # on the threshold for rounding to decide (the as-run check compares them exactly).
    from inspector.policy.operating_point import verdicts_at

    sc = {
        "score": np.array([s for s, _ in frames]),
        "cls": np.full(len(frames), CLASSES.index("crack")),
        "pixel_fraction": np.ones(len(frames)),
    }
    labels = ["crack" if bad else "free" for _, bad in frames]
    thr, _ = q.pick_threshold(sc, labels, CLASSES, "free")
    assert 0.0 < thr < 1.0
    assert not np.isin(thr, sc["score"])
    got = verdicts_at(
        q.tiling_probs(sc, len(CLASSES), 0), np.zeros((6, 6)), [np.log(thr / (1 - thr))]
    )
    assert [CLASSES[i] for i in got[0]] == q.tiling_verdicts(sc, thr, CLASSES, "free")


def test_reselect_re_picks_the_kept_chunk_by_val_auroc(magnetic_tile, tmp_path):
    import torch

    torch.set_num_threads(1)
    cfg = q.agent_config(
        0, n_envs=1, n_steps=32, batch_size=32, n_epochs=1, cnn_channels=4, features_dim=16
    )
    cfg = cfg.replace(bc_samples=32, bc_epochs=1)
    out_dir, runs_dir, suffix = tmp_path / "results", tmp_path / "runs", "_s0_1s"
    out_dir.mkdir()
    kw = dict(first_chunk=32, chunk=32, cfg=cfg, val_episodes=4, test_episodes=3)
    r = q.run_agent(magnetic_tile, 8.0, 0, runs_dir / f"agent{suffix}", **kw)
    assert len(r["history"]) >= 2  # several chunks to choose from
    save(out_dir, "agent", 0, 1, r)
    src = runs.find_run(out_dir, "agent", 0, 1).data
    d = q.reselect(src, runs_dir, "agent", suffix, magnetic_tile, 4, 3)
    assert d["reselected_from"] == "agent_s0_1s" and d["select"] == "defect_auroc"
    assert [e["steps"] for e in d["history"]] == [e["steps"] for e in r["history"]]
    best = max(d["history"], key=lambda e: (e["defect_auroc"] or -1, e["balanced_accuracy"]))
    assert d["best_val"]["defect_auroc"] == best["defect_auroc"]
    assert (runs_dir / "agent_sauc_s0_1s" / "best" / "model.zip").is_file()
    assert d["test"]["episodes"] == 3
    with pytest.raises(RuntimeError, match="no saved run"):
        q.reselect(None, runs_dir, "agent_pp8000", suffix, magnetic_tile)


def tiny_agent(seed: int):
    """A TrainConfig that trains in seconds (one 32-step rollout, a 4-channel CNN)."""
    return q.agent_config(
        seed,
        n_envs=1,
        n_steps=32,
        batch_size=32,
        n_epochs=1,
        cnn_channels=4,
        features_dim=16,
        bc_samples=32,
        bc_epochs=1,
    )


def test_agent_chunks_resume_and_report(magnetic_tile, tmp_path):
    import torch

    torch.set_num_threads(1)
    cfg = tiny_agent(0)
    prof = q.variant_profile(3, tmp_path / "profile_variant.yaml")
    kw = dict(first_chunk=32, cfg=cfg, val_episodes=1, test_episodes=3, profile_path=prof)
    r = q.run_agent(magnetic_tile, 1e-3, 0, tmp_path, **kw)
    assert r["steps"] == 32 and len(r["history"]) == 1
    # The variant profile is the one trained with: its memory is the observation's.
    from inspector.profile import load_profile

    assert load_profile(str(tmp_path / "best" / "profile.yaml")).scan.memory == 3
    assert q.agent_name("agent" + q.agent_tag(8000, True, 8, True, True)).endswith(
        "crops, glimpse CNN frozen, 8 remembered glimpses, per-glimpse evidence head,"
        " balanced verdict loss (stop weight 8))"
    )
    tag = q.agent_tag(8000, evidence=True, all_levels=True, overview_evidence=True)
    assert tag == "_pp8000_ms_ev_ov"
    assert q.agent_name("agent" + tag).endswith(
        "8,000 crops, crops from every zoom level, per-glimpse evidence head,"
        " evidence on the overview)"
    )
    assert r["test"]["episodes"] == 3
    assert (tmp_path / "best" / "model.zip").is_file()
    state = json.loads((tmp_path / "state.json").read_text())
    assert state["steps"] == 32
    # Budget spent: a second call resumes, trains nothing more, and reports the same run.
    again = q.run_agent(magnetic_tile, 1e-3, 0, tmp_path, **kw)
    assert again["steps"] == 32 and len(again["history"]) == 1
    text = q.report({"agent": r}, "test", CLASSES, "free")
    assert "Agent diagnosis" in text
    op = r["operating_point"]
    assert op["test_as_run"]["balanced_accuracy"] == pytest.approx(r["test"]["balanced_accuracy"])


def test_report_calls_few_pixels_hollow_when_quality_is_missed():
    labels = ["free", "free", "crack", "blowhole"]

    def result(verdicts, pf):
        m = q.frame_metrics(CLASSES, "free", labels, verdicts, [pf] * 4)
        return {"budget_s": 1.0, "spent_s": 1.0, "test": m}

    tiling = {**result(labels, 1.1), "tiles_per_frame": 6.0, "threshold": 0.5}
    tiling["fit"] = {"samples_seen": 1, "best_at_s": 0.0}
    tiling["train_tiles"] = {}
    run = {"steps": 512, "train_s": 1.0, "steps_per_s": 512.0, "history": []}

    def agent(verdicts, pf):
        r = {**result(verdicts, pf), **run}
        r["best_val"] = {"steps": 512, "balanced_accuracy": r["test"]["balanced_accuracy"]}
        return r

    blind = {"tiling": tiling, "agent": agent(["free"] * 4, 0.0)}
    assert "hollow" in q.report(blind, "test", CLASSES, "free").split("Agent diagnosis")[0]
    good = {"tiling": tiling, "agent": agent(labels, 0.11)}
    text = q.report(good, "test", CLASSES, "free")
    assert "pixels 10.00% of tiling's (met)" in text


def test_runs_of_several_seeds_get_a_table_with_their_medians(tmp_path):
    labels = ["free", "free", "crack", "blowhole"]

    def save_run(key, seed, verdicts, budget=1200):
        m = q.frame_metrics(CLASSES, "free", labels, verdicts, [0.1] * 4)
        save(tmp_path, key, seed, budget, {"test": m})

    save_run("agent_pp8000_ms_ev_ov_bal", 0, labels)  # all right: 1.0 / 1.0 / 0.0
    save_run("agent_pp8000_ms_ev_ov_bal", 1, ["crack", "free", "crack", "free"])
    save_run("agent_pp8000_ms_ev_ov_bal", 2, ["free", "free", "crack", "crack"])
    save_run("tiling", 0, labels)  # one seed: no row
    save_run("agent", 0, labels, budget=150)  # another budget: not counted
    by_seed = q.results_by_seed(tmp_path, 1200)
    assert set(by_seed) == {"agent_pp8000_ms_ev_ov_bal", "tiling"}
    assert sorted(by_seed["agent_pp8000_ms_ev_ov_bal"]) == [0, 1, 2]
    text = q.seeds_table(by_seed, {})
    rows = [r for r in text.splitlines() if r.startswith("| agent")]
    assert len(rows) == 1 and "| 0,1,2 |" in rows[0]
    assert sum(r.startswith("| ") for r in text.splitlines()) == 2  # header + that row
    cells = [c.strip() for c in rows[0].strip("|").split("|")]
    recalls = sorted(by_seed["agent_pp8000_ms_ev_ov_bal"][s]["defect_recall"] for s in range(3))
    assert cells[4] == f"{recalls[1]:.3f}"  # the median of the three seeds
    assert q.seeds_table({"tiling": by_seed["tiling"]}, {}) == ""


def test_operating_points_get_a_table_with_medians(tmp_path):
    def save_op(key, seed, auroc, recall, fa):
        op = {"false_alarm_ceiling": 0.05, "auroc_test": auroc}
        op["test"] = {"defect_recall": recall, "false_alarm_rate": fa, "balanced_accuracy": 0.5}
        save(tmp_path, key, seed, 1200, {"test": {}, "operating_point": op})

    save_op("agent_pp8000", 0, 0.9, 0.6, 0.04)
    save_op("agent_pp8000", 1, 0.8, 0.4, 0.02)
    save_op("agent_pp8000", 2, 0.95, 0.8, 0.05)
    save_op("tiling", 0, 0.85, 0.5, 0.03)
    save(tmp_path, "fullframe", 0, 1200, {"test": {}})  # none
    ops = q.results_by_seed(tmp_path, 1200, "operating_point")
    assert set(ops) == {"agent_pp8000", "tiling"}
    text = q.operating_table(ops, {"tiling": "tiling"})
    rows = [r for r in text.splitlines() if r.startswith("| agent") or r.startswith("| tiling")]
    assert len(rows) == 2
    cells = [c.strip() for c in rows[0].strip("|").split("|")]
    assert cells[1] == "0,1,2" and cells[3:6] == ["0.900", "0.600", "0.040"]
    assert "false alarms <= 0.05" in text
    assert q.operating_table({}, {}) == ""


def test_runs_at_other_budgets_sit_beside_the_same_seed_at_the_tables_budget(tmp_path):
    def save_op(key, seed, budget, auroc, bal):
        op = {"false_alarm_ceiling": 0.05, "auroc_test": auroc}
        op["test"] = {"defect_recall": 0.5, "false_alarm_rate": 0.04, "balanced_accuracy": bal}
        doc = {"test": {"balanced_accuracy": bal}, "operating_point": op, "spent_s": budget}
        save(tmp_path, key, seed, budget, doc)

    save_op("agent_pp8000", 0, 1200, 0.9, 0.7)
    save_op("agent_pp8000", 0, 2400, 0.95, 0.8)
    save_op("tiling", 1, 2400, 0.85, 0.6)  # no run of seed 1 at 1200 s
    assert q.budgets_table(tmp_path, 2400, {}) == q.budgets_table(tmp_path, 2400.0, {})
    text = q.budgets_table(tmp_path, 1200, {"tiling": "tiling"})
    rows = [r for r in text.splitlines() if r.startswith("| agent") or r.startswith("| tiling")]
    assert len(rows) == 2  # the 1200 s run is the table's own budget: not a row
    agent = [c.strip() for c in rows[0].strip("|").split("|")]
    assert agent[1:3] == ["0", "40 / 40"]
    assert agent[3:] == ["0.950 / 0.50 / 0.04 / 0.800", "0.900 / 0.50 / 0.04 / 0.700"]
    tiling = [c.strip() for c in rows[1].strip("|").split("|")]
    assert tiling[0] == "tiling" and tiling[-1] == "—"
    assert "at 20 min" in text
    assert q.budgets_table(tmp_path / "none", 1200, {}) == ""


def test_the_kept_chunk_follows_the_selection_figure():
    a = {"balanced_accuracy": 0.6, "defect_auroc": 0.9}
    b = {"balanced_accuracy": 0.7, "defect_auroc": 0.85}
    assert q._better(b, a, "balanced_accuracy") and not q._better(a, b, "balanced_accuracy")
    assert q._better(a, b, "defect_auroc") and not q._better(b, a, "defect_auroc")
    assert not q._better(dict(a), a, "balanced_accuracy")  # a tie keeps the earlier chunk
    # A kept entry from before AUROC was recorded loses to any entry that has one.
    assert q._better(
        {"balanced_accuracy": 0.1, "defect_auroc": 0.5}, {"balanced_accuracy": 0.9}, "defect_auroc"
    )
    with pytest.raises(ValueError, match="select must be"):
        q._better(a, b, "accuracy")
    assert q.agent_tag(8000, perception_epochs=30, select_auroc=True) == "_pp8000_pe30_sauc"
    assert q.agent_tag(cnn_channels=16) == "_c16"
    assert q.agent_name("agent_c16_pp8000_pe30_sauc").endswith(
        "glimpse CNN 16 channels wide, perception pretraining on 8,000 crops,"
        " 30 pretraining epochs, chunk kept by val AUROC)"
    )


def test_a_verdict_ensemble_of_saved_seeds_is_scored_and_tabled(magnetic_tile, tmp_path):
    import torch

    torch.set_num_threads(1)
    out_dir, runs_dir, budget = tmp_path / "results", tmp_path / "runs", 1e-3
    out_dir.mkdir()
    for seed in (0, 1):
        kw = dict(first_chunk=32, cfg=tiny_agent(seed), val_episodes=1, test_episodes=3)
        r = q.run_agent(magnetic_tile, budget, seed, runs_dir / f"agent_s{seed}_0s", **kw)
        save(out_dir, "agent", seed, budget, q._public(r))
    r = q.run_ensemble(out_dir, runs_dir, "agent", [1, 0], budget, magnetic_tile, 6, 6)
    assert r["seeds"] == [1, 0] and len(r["members"]) == 2
    assert r["test"]["episodes"] == 6
    assert (
        r["operating_point"]["auroc_test"] is None or 0 <= r["operating_point"]["auroc_test"] <= 1
    )
    path = q.ensemble_path(out_dir, "agent", [1, 0], budget)
    assert path.name == "agent_seeds1-0_0s.json"
    ens_config = runs.ensemble_config("test", {}, [1, 0], budget)
    runs.save_run(path, ens_config, r)
    # Its own folder: the per-seed tables never take it for a run of seed 1.
    assert all(s.path != path for s in runs.runs(out_dir)) and len(q.saved_results(out_dir)) == 2
    text = q.ensembles_table(out_dir / "ensembles", {})
    assert "Verdict ensembles" in text and "| 1,0 |" in text and "2 x " in text
    # Judged against the goals at its operating point, pixels against tiling's.
    good = {"defect_recall": 0.96, "false_alarm_rate": 0.04, "balanced_accuracy": 0.9}
    for at, px, want in [
        (good, 0.1, "| met |"),
        ({**good, "false_alarm_rate": 0.06}, 0.1, "| missed: false alarm rate |"),
        (good, 0.3, "| missed: pixels |"),
    ]:
        op = {**r["operating_point"], "test": at}
        doc = {**r, "operating_point": op, "test": {**r["test"], "pixel_fraction": px}}
        runs.save_run(path, ens_config, doc)
        table = q.ensembles_table(out_dir / "ensembles", {}, tiling_pixels=1.0)
        assert want in next(x for x in table.splitlines() if "| 1,0 |" in x)
        summary = next(x for x in table.splitlines() if x.startswith("| 2 x "))
        assert summary.endswith(f"| {int(want == '| met |')} / 1 |")
    with pytest.raises(RuntimeError, match="no saved run agent_s2_0s"):
        q.run_ensemble(out_dir, runs_dir, "agent", [0, 2], budget, magnetic_tile)
    with pytest.raises(argparse.ArgumentTypeError):
        q.seed_list("0,0")
    assert q.seed_list("3,1,2") == [3, 1, 2]
