"""Training presets: the best recipe known for each kind of data.

``inspector train`` without ``--config`` trains with a preset, chosen from the camera
unless ``--preset`` names one: the synthetic camera gets ``synthetic``, every other
driver (footage folders, manifests, video, stores, live cameras) ``footage``. A
``--config`` file alone is the whole recipe (its keys over the bare
:class:`TrainConfig` defaults, as before presets); with ``--preset`` too, its keys go
on top of the preset, so it only needs what it changes. ``--preset none`` is the bare
defaults. Both data presets keep the best model on val frames and end by choosing
the operating point there (:data:`ENDING`).

What each preset holds was measured (docs/benchmarks.md): ``synthetic`` is the
learning-efficiency study's full stack on the quadrants task (perception pretraining on
8,000 native crops, then cloning 8,192 steps of the scripted teacher: 90 % accuracy in
5 of 5 seeds, where reward-only PPO reached it in none); ``footage`` is the magnetic-tile
benchmark's best agent (crops from every zoom level, per-glimpse evidence head that
also judges the overview, class-balanced verdict loss with the stop steps weighted 8,
constant learning rate), trained and run one zoom level above native
(:data:`ABOVE_NATIVE`): on the magnetic tiles native glimpses make the agent worse, and
members trained with their rollouts stopped there rank the test tiles at AUROC 0.930 and
0.933 (means of 4, seeds 4 and 8) where the same seeds trained over every level reach
0.906 and 0.887 read at that level; their ensembles 0.975 and 0.982 against 0.945 and
0.956 (docs/benchmarks.md, search_depth). Its 300,000 steps: the members' val AUROC was
still rising at 150,000; continued to 300,000 (seeds 4, 8, 12) members rank the test tiles
at 0.960 (0.927 at 150,000), ensembles at 0.993 (0.978), students at 0.971 (0.939)
(docs/benchmarks.md, members_cost).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inspector.errors import InspectorError
from inspector.train.config import TrainConfig

#: ``--preset`` value that picks the preset from the camera.
AUTO = "auto"
#: ``--preset`` value for the bare TrainConfig defaults.
NONE = "none"
#: Weight of the scripted teacher's stop steps in the balanced verdict loss: they are
#: about 7 % of the cloned steps and the only ones where the verdict is read.
STOP_WEIGHT = 8.0
#: What every data preset does at the end of training (with val frames): keep the best
#: model checked every this many PPO steps, judged at the operating point the run will
#: choose (a student's distilled ranking is not judged at an ok bias it will never run
#: at), then choose the balanced operating point, and with it the search depth (a
#: shallower one only where it is strictly better on val).
ENDING = {
    "select_interval": 16384,
    "select_metric": "operating_point",
    "operating_point": "balanced",
    "search_depth": "auto",
}

#: ``Preset.rollout_depth``: training's rollouts and val checks stop one zoom level above
#: native (``rollout_max_zoom``: the profile's ``zoom_levels - 2``; a profile with no
#: level between the overview and native keeps every level), and the closing
#: calibration's ``auto`` search depth tries no deeper.
ABOVE_NATIVE = "above_native"


@dataclass(frozen=True)
class Preset:
    """A named recipe: TrainConfig overrides and a default training length.

    :param name: the ``--preset`` value.
    :param about: one line for ``--help`` and the report.
    :param overrides: TrainConfig fields the preset sets (the rest keep their defaults).
    :param timesteps: environment steps of PPO when ``--timesteps`` is not given.
    :param rollout_depth: :data:`ABOVE_NATIVE`, or None for every zoom level; resolved
        against the profile (:func:`resolve`).
    :param distill_share: ``train --members``: the student's distillation steps as a
        share of a member's PPO steps (unless ``--distill-timesteps`` or the config's
        ``distill_timesteps`` says).
    """

    name: str
    about: str
    overrides: Mapping[str, Any] = field(default_factory=dict)
    timesteps: int = 50_000
    rollout_depth: str | None = None
    distill_share: float = 0.5


PRESETS: dict[str, Preset] = {
    "synthetic": Preset(
        "synthetic",
        "synthetic panels: perception pretraining on 8,000 native crops, then cloning "
        "8,192 steps of the scripted teacher, then HybridPPO",
        {"perception_samples": 8000, "bc_samples": 8192, **ENDING},
        timesteps=16_384,
    ),
    "footage": Preset(
        "footage",
        "real footage: perception pretraining on 8,000 crops from every zoom level, "
        "evidence head on glimpses and overview, balanced verdict loss (stop weight 8), "
        "constant learning rate, trained and run one zoom level above native; with "
        "--members, a depthwise-separable student four times as wide distilled from scratch",
        {
            "perception_samples": 8000,
            "perception_levels": "all",
            "glimpse_evidence": True,
            "overview_evidence": True,
            "verdict_balance": True,
            "verdict_stop_weight": STOP_WEIGHT,
            "lr_floor": TrainConfig().learning_rate,
            # train --members: the student starts from fresh weights (its own perception
            # pretraining) at four times the members' width. On the magnetic tiles a
            # student started from the best member learned its teacher on the training
            # tiles and no further (test AUROC 0.960-0.980, its ensemble's 0.992-0.997);
            # from scratch it ranks the tiles as its ensemble does, and at width 32 (not
            # 16) it also tells the defect types apart (docs/training.md).
            "distill_init": "scratch",
            "student_cnn_channels": 32,
            # Its glimpse CNN depthwise-separable: a third of the plain student's time per
            # glimpse (0.15 ms against 0.45, the ensemble 0.37, a member 0.12), so a
            # station runs one agent at about one member's cost. It learns its teacher
            # more slowly, hence 150,000 steps; with the student check it met the quality
            # goal in 5 of 7 seeds (40-68) where the plain student met it in 4, and in
            # both fresh commands of this preset (seeds 68, 72; docs/training.md).
            "student_cnn_separable": True,
            # Rounds of 12,500 steps (a val check after each).
            "distill_rounds": 12,
            **ENDING,
        },
        timesteps=300_000,
        rollout_depth=ABOVE_NATIVE,
        # 150,000 of 300,000: the separable student reached its val figures at about
        # twice the plain one's steps (seed 32: 0.821 at 100,000, 0.956 at 162,500);
        # the plain student's 100,000 were the first 8 rounds of 150,000-step runs
        # (docs/training.md).
        distill_share=1 / 2,
    ),
    NONE: Preset(
        NONE,
        "the bare TrainConfig defaults (no perception pretraining, the last model kept,"
        " no operating point)",
        {},
    ),
}


def preset_names() -> list[str]:
    """The ``--preset`` choices."""
    return [AUTO, *PRESETS]


def preset_for(camera: str) -> str:
    """The preset ``auto`` picks for a camera driver."""
    return "synthetic" if camera == "synthetic" else "footage"


def resolve(
    name: str | None, camera: str, profile: Any = None, *, rollout_depth: bool = True
) -> tuple[Preset, TrainConfig, list[str]]:
    """The preset ``name`` (``auto``/None: from the camera) as a TrainConfig.

    :param profile: the loaded reward profile; ``overview_evidence`` needs its overview
        as large as its glimpses and is dropped (with a note) where it is not; a
        preset's ``rollout_depth`` becomes a zoom level of it (with a note saying so).
    :param rollout_depth: False: ignore the preset's ``rollout_depth`` (``train
        --search-depth full`` or a level: the depth training runs at is given).
    :returns: (preset, config, notes on what was adapted to the profile).
    :raises InspectorError: an unknown preset.
    """
    key = preset_for(camera) if name in (None, "", AUTO) else name
    if key not in PRESETS:
        raise InspectorError(f"unknown preset {name!r}; choose one of: {', '.join(preset_names())}")
    preset = PRESETS[key]
    changes = dict(preset.overrides)
    notes = []
    if changes.get("overview_evidence") and profile is not None:
        scan = profile.scan
        if scan.overview != scan.glimpse:
            changes["overview_evidence"] = False
            notes.append(
                f"overview evidence off: the profile's overview ({scan.overview} px) is not "
                f"its glimpse size ({scan.glimpse} px)"
            )
    if rollout_depth and preset.rollout_depth == ABOVE_NATIVE and profile is not None:
        levels = int(profile.scan.zoom_levels)
        if levels >= 3:
            changes["rollout_max_zoom"] = levels - 2
            notes.append(
                f"trained and run at zoom level {levels - 2} of 0..{levels - 1}, one above "
                "native: no native glimpses (--search-depth full for defects only native "
                "pixels show)"
            )
        else:
            notes.append(
                f"every zoom level: the profile's {levels} levels have none between the "
                "overview and native"
            )
    return preset, TrainConfig().replace(**changes), notes


def with_config_file(cfg: TrainConfig, path: str | Path) -> TrainConfig:
    """``cfg`` with the keys a TrainConfig YAML file sets, validated together: a file may
    set what is only valid on top of the preset (a student's width over the footage
    preset's ``distill_init: scratch``). Errors are the file's, located.

    :raises InspectorError: a bad file or an invalid combination.
    """
    return TrainConfig.load(path, base=cfg)


def describe(preset: Preset, cfg: TrainConfig) -> dict[str, Any]:
    """What the report says about the recipe: the preset, the fields it sets, and every
    field of the run's config that differs from the bare defaults (a config file's too)."""
    return {
        "name": preset.name,
        "about": preset.about,
        "set": dict(preset.overrides),
        "differs_from_defaults": {
            f.name: getattr(cfg, f.name)
            for f in dataclasses.fields(TrainConfig)
            if getattr(cfg, f.name) != getattr(TrainConfig(), f.name)
        },
    }
