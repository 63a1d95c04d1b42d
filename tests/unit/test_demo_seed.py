"""``demo --seed``: the training seed reaches the run's config and the cache key (a run
of another seed is trained again, not reused); the station's parts stay the same."""

from __future__ import annotations

from pathlib import Path

from inspector.workflows import demo


def test_the_seed_reaches_training_and_the_cache(tmp_path, monkeypatch):
    import inspector.train.runner as runner

    seen = []

    def fake_train(profile, camera, params, timesteps, out, cfg, **kw):
        seen.append(cfg.seed)
        Path(out).mkdir(parents=True)
        for name in ("model.zip", "report.json"):
            (Path(out) / name).write_text("{}")

    monkeypatch.setattr(runner, "train_run", fake_train)
    opts = demo.DemoOptions(out=tmp_path, seed=3)
    demo.train_or_reuse(opts)
    demo.train_or_reuse(opts)  # the same seed: reused
    assert seen == [3]
    demo.train_or_reuse(demo.DemoOptions(out=tmp_path, seed=4))
    assert seen == [3, 4]
    assert demo._cache_key(demo.DemoOptions()) != demo._cache_key(demo.DemoOptions(seed=1))


def test_the_cli_passes_it(monkeypatch):
    from inspector.cli import main

    got = []
    monkeypatch.setattr(demo, "run_demo", lambda opts: got.append(opts) or 0)
    assert main(["demo", "--seed", "5", "--out", "x"]) == 0
    assert got[0].seed == 5 and got[0].out == Path("x")
