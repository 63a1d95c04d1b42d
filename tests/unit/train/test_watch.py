"""A training run's progress lines and speed watch; the PPO minibatch that fits a rollout."""

from __future__ import annotations

import json
import logging
import warnings

from inspector.train.config import TrainConfig
from inspector.train.watch import MembersProgress, members_line


def test_the_members_parent_reads_each_members_progress(tmp_path, caplog):
    a, b, c = tmp_path / "m0", tmp_path / "m1", tmp_path / "m2"
    for d in (a, b, c):
        d.mkdir()
    (a / "progress.json").write_text(
        json.dumps({"done": 2048, "total": 8192, "steps_per_s": 102.4, "figure": "acc 0.50"})
    )
    (b / "progress.json").write_text(json.dumps({"done": 8192, "total": 8192, "finished": True}))
    line = members_line([a, b, c])
    assert line == "m0 2,048/8,192 at 102 steps/s, ETA 60 s, acc 0.50; m1 done; m2 starting"
    watch = MembersProgress(every=0)
    with caplog.at_level(logging.INFO, "inspector.progress"):
        assert watch.poll([a]) == "members: m0 2,048/8,192 at 102 steps/s, ETA 60 s, acc 0.50"
    assert caplog.messages
    doc = json.loads((a / "progress.json").read_text())
    (a / "progress.json").write_text(json.dumps({**doc, "slow": "training runs at 3 steps/s"}))
    caplog.clear()
    with caplog.at_level(logging.INFO, "inspector.progress"):
        watch.poll([a])
        watch.poll([a])  # the same stretch: said once
    assert [m for m in caplog.messages if "3 steps/s" in m] == [
        "member m0: training runs at 3 steps/s"
    ]


def test_an_unchanged_members_line_is_not_repeated_until_a_heartbeat(tmp_path, caplog):
    a = tmp_path / "student"
    a.mkdir()
    (a / "progress.json").write_text(json.dumps({"done": 12500, "total": 100000}))
    clock = [1000.0]
    watch = MembersProgress(every=10, clock=lambda: clock[0])
    with caplog.at_level(logging.INFO, "inspector.progress"):
        said = []
        for _ in range(12):  # a poll every 10 s, the student's progress unchanged
            clock[0] += 10
            said.append(watch.poll([a]))
        (a / "progress.json").write_text(json.dumps({"done": 25000, "total": 100000}))
        clock[0] += 10
        said.append(watch.poll([a]))
    # the first, a heartbeat 5 intervals later, another 5 after that; then the change
    assert [i for i, s in enumerate(said) if s] == [0, 5, 10, 12]
    assert said[-1] == "members: student 25,000/100,000"
    assert len(caplog.messages) == 4


def test_the_minibatch_fits_the_rollout_with_a_note():
    assert TrainConfig().minibatch() == (256, None)  # 128 x 4 = 512
    batch, note = TrainConfig(n_envs=1).minibatch()
    assert batch == 128
    assert "batch_size 256 does not fit a rollout of n_steps 128 x n_envs 1 = 128" in note
    assert TrainConfig(n_envs=3).minibatch()[0] == 192  # the largest divisor of 384 <= 256


def test_a_one_environment_model_builds_without_the_sb3_batch_warning():
    from inspector.profile import load_profile
    from inspector.train.runner import build_model, make_vec_env

    cfg = TrainConfig(n_envs=1, vec_env="dummy", cnn_channels=4, features_dim=16)
    env = make_vec_env("reward_profiles/lcd_panel.yaml", "synthetic", {"size": "128"}, cfg, False)
    try:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            model = build_model(
                env, load_profile("reward_profiles/lcd_panel.yaml"), cfg, None, None
            )
    finally:
        env.close()
    assert model.batch_size == 128
    assert not [w for w in seen if "mini-batch" in str(w.message)]


def test_a_run_without_a_terminal_logs_progress_lines_and_writes_progress_json(
    tmp_path, caplog, monkeypatch
):
    from inspector.train.runner import train_run

    monkeypatch.setenv("INSPECTOR_PROGRESS_INTERVAL", "0")
    cfg = TrainConfig(
        n_envs=1, vec_env="dummy", n_steps=32, batch_size=32, n_epochs=1, cnn_channels=4,
        features_dim=16, net_arch=[16], teacher="none", final_eval_episodes=0,
    )  # fmt: skip
    with caplog.at_level(logging.INFO, "inspector.progress"):
        train_run(
            "reward_profiles/lcd_panel.yaml",
            "synthetic",
            {"size": 128},
            64,
            tmp_path / "r",
            cfg,
            progress=True,
            evaluate_after=False,
        )  # fmt: skip  (progress=True, but pytest's stderr is no terminal: lines, no bar)
    lines = [m for m in caplog.messages if m.startswith("train r: ")]
    assert lines and "/64 steps" in lines[0] and "steps/s" in lines[0]
    assert lines[-1].endswith("(done)")
    doc = json.loads((tmp_path / "r" / "progress.json").read_text())
    assert doc["done"] == doc["total"] == 64 and doc["finished"] is True
