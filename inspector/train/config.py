"""TrainConfig: every training setting, documented, loadable from YAML."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from inspector.yamlio.dataclass_load import load_dataclass

#: ``perception_levels`` values: the zoom levels perception pretraining crops come from.
PERCEPTION_LEVELS = ("native", "all")
#: ``select_metric`` values.
SELECT_METRICS = ("operating_point", "balanced_accuracy", "defect_auroc")
#: ``operating_point`` values: calibrate's objectives, or none.
OPERATING_POINTS = ("balanced", "max_false_alarms", "min_recall", "none")
#: ``distill`` values: how ``train --members`` distils its ensemble.
DISTILL_METHODS = ("supervised", "ppo")
#: ``distill_init`` values: the member that leads the ensemble and starts the student.
DISTILL_INITS = ("lead", "best", "scratch")


def _count(value: object) -> bool:
    """A whole number >= 0 (not a bool, not a float)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


@dataclass
class TrainConfig:
    """Training settings (YAML keys are the field names; CLI flags override).

    :param n_envs: parallel environments.
    :param vec_env: ``subproc`` (SubprocVecEnv, one process per env) or ``dummy`` (in-process).
    :param n_steps: steps per env per rollout.
    :param batch_size: PPO minibatch size.
    :param n_epochs: PPO epochs per rollout.
    :param gamma: discount factor (also the shaping's gamma).
    :param gae_lambda: GAE lambda.
    :param clip_range: PPO clip range.
    :param ent_coef: entropy bonus coefficient.
    :param vf_coef: value loss coefficient.
    :param max_grad_norm: gradient clipping norm.
    :param learning_rate: initial learning rate (cosine-annealed to ``lr_floor``).
    :param lr_floor: final learning rate of the cosine schedule.
    :param w_rl: hybrid loss weight of the PPO loss.
    :param w_sl: hybrid loss weight of the verdict cross-entropy on labels.
    :param w_kd: hybrid loss weight of the KL distillation from the teacher.
    :param teacher: ``scripted`` (searching teacher that uses the truth once in sight), a
        model path, or ``none``.
    :param seed: random seed (environments, network, sampling).
    :param checkpoint_interval: environment steps between checkpoints (at rollout ends).
    :param eval_interval: environment steps between evaluations (progress + curriculum); 0: off.
    :param eval_episodes: parts per evaluation (fixed frames, deterministic policy).
    :param eval_camera_params: camera parameter overrides for the closing evaluation;
        empty: held-out frames derived from the training camera (a manifest's or store's
        ``split: train`` becomes its ``test``/``heldout`` split; none where there are none:
        see ``inspector.train.select.eval_params``).
    :param curriculum: list of camera-parameter overrides from easy to hard; training moves to
        the next stage when evaluation accuracy reaches ``curriculum_threshold``.
    :param curriculum_threshold: evaluation accuracy that advances the curriculum.
    :param cnn_channels: width of the glimpse CNN.
    :param cnn_fine: the glimpse CNN's full-resolution variant (stride-1 5x5 first
        layers): needed for one-pixel defects on a periodic texture, at several times the
        glimpse CNN's compute (see ``inspector.train.network.GlimpseCNN``).
    :param cnn_separable: the glimpse CNN's depthwise-separable variant (a 3x3 filter per
        channel, then a 1x1 mix): a wide CNN at a fraction of the plain one's compute
        (see ``inspector.train.network.GlimpseCNN``); not with ``cnn_fine``.
    :param features_dim: size of the features the CNN extractor produces.
    :param net_arch: hidden layers of the policy and value heads.
    :param final_eval_episodes: parts of the closing evaluation written to report.json:
        None (the default) every held-out frame once (100 parts of an endless source such
        as the synthetic camera), 0 none, N at most N.
    :param bc_samples: environment steps of the scripted teacher to behaviour-clone before PPO
        (only with ``teacher: scripted``; 0 = off). They count as training steps.
    :param bc_epochs: behaviour-cloning epochs over those samples.
    :param bc_lr: behaviour-cloning learning rate.
    :param perception_samples: native glimpse crops, labelled from the frames' defect
        masks, to pretrain the glimpse CNN on before cloning and PPO (see
        ``inspector.train.perception``; 0 = off). They count as training steps.
    :param perception_epochs: epochs of that pretraining.
    :param perception_levels: zoom levels those crops come from: ``native`` (the deepest
        level only) or ``all`` (each crop at a random level, exactly the glimpse the
        scanner takes there; a defect crop is kept where the defect shows). ``all``
        teaches the per-glimpse detector the defects that show best at low zoom (large,
        low-contrast ones) and lets it judge every glimpse of a search.
    :param perception_freeze: keep the glimpse CNN fixed after perception pretraining (or
        as ``--init-from`` gave it): behaviour cloning and PPO train the rest of the
        network on its features and cannot wear the pretrained detector down.
    :param glimpse_evidence: a per-glimpse class head whose max probability per class
        over the remembered glimpses joins the features (see
        ``inspector.train.network.InspectorExtractor``); perception pretraining trains it
        (instead of a throw-away head) and ``perception_freeze`` freezes it with the CNN.
    :param overview_evidence: with ``glimpse_evidence``, the evidence head also judges the
        overview (the whole frame, through the glimpse CNN) and its class probabilities
        join the features on every step; the remembered glimpses forget the whole-frame
        view a few steps into a search, the overview never does. Needs the profile's
        ``scan.overview`` equal to ``scan.glimpse``.
    :param critic_warmup: env steps at the start of PPO during which only the value
        function learns (after cloning it is untrained; see ``HybridPPO``); 0 = off.
    :param verdict_on_stop: the PPO ratio counts the verdict's probability on stop steps
        only, where the environment reads it (see ``HybridPPO``); on other steps the
        sampled verdict changes nothing and only adds noise to the verdict head.
    :param verdict_balance: class-balanced verdict cross-entropy, in behaviour cloning
        and in the hybrid loss (see ``inspector.train.losses``): without it the verdict
        head learns the majority ``ok`` on the steps where the teacher has no defect in
        sight yet.
    :param verdict_stop_weight: weight, in that cross-entropy, of the steps where the
        scripted teacher stops (the only ones where the verdict is read); 1 = none.
    :param val_camera_params: camera parameter overrides that give held-out labelled
        frames (never the test split); empty: derived from the training camera (a
        manifest's or store's ``split: train`` becomes ``split: val``; the synthetic
        camera another panel seed), none where nothing can be derived (see
        ``inspector.train.select``). They choose the kept checkpoint and the operating
        point.
    :param select_interval: environment steps of PPO between checks of the model on the
        val frames (also checked after pretraining and at the end); the run keeps the
        best checked model, not the last. 0 (the bare default; the presets set 16384):
        keep the last model.
    :param select_episodes: val parts per check (a folder: at most all its val frames).
    :param select_metric: what picks the kept model on val: ``operating_point`` (the
        figure the run's ``operating_point`` objective maximises, at the ok bias it would
        choose on the val frames for that model: balanced accuracy for ``balanced`` (at
        bias 0 for ``none``), defect recall for ``max_false_alarms``, one minus the false
        alarms for ``min_recall``; ties: defect AUROC; the presets' choice),
        ``balanced_accuracy`` at ok bias 0 (ties: defect AUROC) or ``defect_auroc``
        (threshold-free; ties: balanced accuracy). Equal scores keep the later model.
    :param operating_point: the objective with which training ends by choosing the ok
        bias on the val frames, as ``inspector calibrate`` does: ``balanced``,
        ``max_false_alarms``, ``min_recall``, or ``none`` (no operating point; the bare
        default, the presets set ``balanced``).
    :param operating_target: the false-alarm ceiling or recall floor of that objective.
    :param operating_confidence: with ``max_false_alarms`` or ``min_recall``, the
        confidence at which the target holds on the val frames: the rate's one-sided
        bound there meets it (0.8, the default, as ``calibrate``: four times in five;
        :func:`inspector.policy.operating_point.choose_bias`); null: the rate they show.
        Unused by ``balanced``.
    :param search_depth: the search depth chosen with the operating point: ``full``
        (every zoom level, as trained; the bare default), ``auto`` (the presets: each
        level from the deepest up, a shallower one kept only where it meets the
        objective strictly better on the val frames; the agent then stops rather than
        look deeper, :func:`inspector.train.calibration.choose_operating_point`) or a
        zoom level.
    :param rollout_max_zoom: the search depth of training's rollouts and val checks (None:
        every level, the default; the ``footage`` preset: one level above native): an
        action that would look deeper ends the part, as it does for a model calibrated to
        that depth (``InspectionEnv(max_zoom=...)``); ``search_depth: auto`` then tries
        no deeper level. The
        val checks also judge at a zoom-level ``search_depth`` (the depth the model will
        run at; :func:`inspector.train.select.check_depth`).
    :param distill_timesteps: with ``train --members K``, the student's environment steps
        of distillation from the members' ensemble; 0 = half a member's timesteps.
    :param distill_w_kd: with ``train --members K``, the student's weight of the KL term
        whose teacher is the ensemble (``w_kd`` of the student; see
        ``inspector.train.members``).
    :param distill: how ``train --members K`` distils the ensemble into its student:
        ``supervised`` (the default: the student is rolled out on the training frames and
        learns the ensemble's verdict and moves on the states it visits, round by round,
        no PPO; ``inspector.train.dagger``) or ``ppo`` (PPO with the hybrid loss whose KL
        term's teacher is the ensemble, ``distill_w_kd`` its weight; the earlier way).
    :param distill_init: the member whose weights the student starts from (and whose
        moves its teacher makes; the exported ensemble stays led by m0): ``best`` (the
        default: the member whose kept model has the best val figure of its own run,
        ``select_metric``), ``lead`` (m0) or ``scratch`` (fresh weights with the run's own
        perception pretraining, so the student may differ from its members, e.g. a wider
        ``cnn_channels``; its teacher is led by the best member).
    :param student_cnn_channels: with ``train --members K``, the student's glimpse CNN
        width (0: the members' ``cnn_channels``); a different width needs
        ``distill_init: scratch``.
    :param student_cnn_separable: with ``train --members K``, the student's glimpse CNN
        is the depthwise-separable variant (``cnn_separable``) whatever the members'; a
        student that differs from its members so needs ``distill_init: scratch``.
    :param supervised_distill_steps: environment steps of supervised distillation from
        the run's teacher (a model or ensemble directory) before PPO; ``train --members``
        sets it for its student with ``distill: supervised``. 0 = none.
    :param distill_rounds: roll-out rounds of that distillation (a checkpoint and a val
        check after each).
    :param distill_passes: minibatch samples per round, in multiples of the round's
        steps, drawn from every round's observations so far.
    :param distill_temperature: temperature of the verdict's KL (1: as the distributions
        are; higher: the teacher's doubts weigh more).
    :param distill_w_moves: weight of the moves' KL in it (0: the moves stay as they are
        only as far as the shared features let them).
    :param distill_flips: in that distillation, each observation also flipped
        left-right, upside-down and both (glimpses and overview), each judged by the
        teacher: more inputs to learn the teacher's judgement on, from the same frames.
    :param distill_mixup: in that distillation, function matching: each minibatch's
        glimpses and overviews mixed pairwise (weight ``~ Beta(a, a)``, ``a`` this value)
        and judged by the teacher as mixed (0: off; ``inspector.train.dagger``).
    :param student_attempts: with ``train --members K``, at most this many students are
        distilled (seeds ``seed+K``, ``seed+K+1`` ...): a further one only while every
        student so far falls short of the ensemble's val figure (``select_metric``, the
        same check on the same val frames) by more than ``student_shortfall``; the one
        with the best val figure is kept (``members.json``, ``student``). 1: one student,
        whatever its figure (the report still says how far it falls short).
    :param student_shortfall: how far below the ensemble's val figure a student may be
        and still be kept without distilling another (0: any shortfall asks for another).
    :param student_give_up: with ``train --members K``, a student that is not the last
        attempt gives up at its first val check at or after this share of its steps when
        its best val figure so far is more than ``student_give_up_margin`` below the
        ensemble's, and the next attempt starts (0: every attempt runs its steps). The
        last attempt never gives up.
    :param student_give_up_margin: that margin (larger than ``student_shortfall``: a
        student near the shortfall at half its steps may still reach it).
    :param give_up_below: a val figure (``select_metric``): the run stops at its first
        val check at or after ``give_up_after`` steps whose best so far is below it, and
        ends with its best model as any run does (null: never). ``train --members`` sets
        it for a student from ``student_give_up``.
    :param give_up_after: environment steps before which the run does not give up.
    :param give_up_patience: the run gives up only when its best val figure also rose
        less than 0.01 over its last this many checks (0: below the line is enough;
        :mod:`inspector.train.give_up`).
    :param student_give_up_patience: ``give_up_patience`` of the students that may
        give up.
    """

    n_envs: int = 4
    vec_env: str = "dummy"
    n_steps: int = 128
    batch_size: int = 256
    n_epochs: int = 4
    gamma: float = 0.99
    gae_lambda: float = 0.95
    clip_range: float = 0.2
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    learning_rate: float = 3e-4
    lr_floor: float = 3e-5
    w_rl: float = 0.7
    w_sl: float = 0.2
    w_kd: float = 0.1
    teacher: str = "scripted"
    seed: int = 0
    checkpoint_interval: int = 10_000
    eval_interval: int = 0
    eval_episodes: int = 100
    eval_camera_params: dict[str, str] = field(default_factory=dict)
    curriculum: list[dict[str, str]] = field(default_factory=list)
    curriculum_threshold: float = 0.8
    cnn_channels: int = 8
    cnn_fine: bool = False
    cnn_separable: bool = False
    features_dim: int = 128
    net_arch: list[int] = field(default_factory=lambda: [64])
    final_eval_episodes: int | None = None
    bc_samples: int = 4096
    bc_epochs: int = 8
    bc_lr: float = 1e-3
    perception_samples: int = 0
    perception_epochs: int = 12
    perception_levels: str = "native"
    perception_freeze: bool = False
    glimpse_evidence: bool = False
    overview_evidence: bool = False
    critic_warmup: int = 0
    verdict_on_stop: bool = True
    verdict_balance: bool = False
    verdict_stop_weight: float = 1.0
    val_camera_params: dict[str, str] = field(default_factory=dict)
    select_interval: int = 0
    select_episodes: int = 200
    select_metric: str = "balanced_accuracy"
    operating_point: str = "none"
    operating_target: float | None = None
    operating_confidence: float | None = 0.8
    search_depth: int | str = "full"
    rollout_max_zoom: int | None = None
    distill_timesteps: int = 0
    distill_w_kd: float = 1.0
    distill: str = "supervised"
    distill_init: str = "best"
    student_cnn_channels: int = 0
    student_cnn_separable: bool = False
    supervised_distill_steps: int = 0
    distill_rounds: int = 12
    distill_passes: float = 4.0
    distill_temperature: float = 1.0
    distill_w_moves: float = 1.0
    distill_flips: bool = False
    distill_mixup: float = 0.0
    student_attempts: int = 2
    student_shortfall: float = 0.03
    student_give_up: float = 0.5
    student_give_up_margin: float = 0.06
    give_up_below: float | None = None
    give_up_after: int = 0
    give_up_patience: int = 0
    student_give_up_patience: int = 3

    def validate(self) -> None:
        """Raise ValueError on settings that cannot work."""
        for name in ("n_envs", "n_steps", "batch_size", "n_epochs"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        self._validate_network()
        if self.vec_env not in ("subproc", "dummy"):
            raise ValueError(f"vec_env must be 'subproc' or 'dummy', got {self.vec_env!r}")
        if not 0.0 < self.gamma <= 1.0:
            raise ValueError(f"gamma must be in (0, 1], got {self.gamma}")
        for name in ("w_rl", "w_sl", "w_kd", "learning_rate", "lr_floor", "distill_w_kd"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must not be negative")
        n = self.final_eval_episodes
        if n is not None and not _count(n):
            raise ValueError(f"final_eval_episodes must be a count >= 0 or null (all), got {n!r}")
        for name in ("bc_samples", "perception_samples", "critic_warmup", "distill_timesteps"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must not be negative, got {getattr(self, name)}")
        if self.perception_levels not in PERCEPTION_LEVELS:
            raise ValueError(
                f"perception_levels must be 'native' or 'all', got {self.perception_levels!r}"
            )
        if self.overview_evidence and not self.glimpse_evidence:
            raise ValueError("overview_evidence needs glimpse_evidence (the head it reuses)")
        if self.verdict_stop_weight <= 0:
            raise ValueError(
                f"verdict_stop_weight must be positive, got {self.verdict_stop_weight}"
            )
        if self.select_interval < 0 or self.select_episodes < 1:
            raise ValueError("select_interval must be >= 0 and select_episodes >= 1")
        if self.select_metric not in SELECT_METRICS:
            raise ValueError(
                f"select_metric must be one of {', '.join(SELECT_METRICS)},"
                f" got {self.select_metric!r}"
            )
        if self.operating_point not in OPERATING_POINTS:
            raise ValueError(
                f"operating_point must be one of {', '.join(OPERATING_POINTS)},"
                f" got {self.operating_point!r}"
            )
        needs_target = self.operating_point in ("max_false_alarms", "min_recall")
        if needs_target != (self.operating_target is not None):
            raise ValueError(
                "operating_target is needed by max_false_alarms and min_recall, and only by them"
            )
        if needs_target and not 0.0 <= float(self.operating_target) <= 1.0:
            raise ValueError(f"operating_target must be 0..1, got {self.operating_target}")
        c = self.operating_confidence
        if c is not None and (
            isinstance(c, bool) or not isinstance(c, (int, float)) or not 0.0 < c < 1.0
        ):
            raise ValueError(
                f"operating_confidence must be strictly between 0 and 1 (e.g. 0.8) or null,"
                f" got {c!r}"
            )
        depth = self.search_depth
        if depth not in ("auto", "full") and not _count(depth):
            raise ValueError(f"search_depth must be auto, full or a zoom level, got {depth!r}")
        z = self.rollout_max_zoom
        if z is not None and not _count(z):
            raise ValueError(f"rollout_max_zoom must be a zoom level (0, 1, ...), got {z!r}")
        if self.w_rl + self.w_sl + self.w_kd <= 0:
            raise ValueError("w_rl + w_sl + w_kd must be positive")
        self._validate_distillation()

    def _validate_network(self) -> None:
        """The network's sizes: a zero or negative width fails here, not inside torch."""
        if not _count(self.cnn_channels) or not 1 <= self.cnn_channels <= 256:
            raise ValueError(
                f"cnn_channels must be a whole number from 1 to 256, got {self.cnn_channels!r}"
            )
        if not _count(self.features_dim) or self.features_dim < 1:
            raise ValueError(f"features_dim must be at least 1, got {self.features_dim!r}")
        if not isinstance(self.cnn_fine, bool) or not isinstance(self.cnn_separable, bool):
            raise ValueError("cnn_fine and cnn_separable must be true or false")
        if self.cnn_fine and self.cnn_separable:
            raise ValueError("cnn_fine and cnn_separable exclude each other: choose one")
        arch = self.net_arch
        if not isinstance(arch, list) or not all(_count(n) and n >= 1 for n in arch):
            raise ValueError(f"net_arch must be a list of layer sizes >= 1, got {arch!r}")

    def _validate_distillation(self) -> None:
        if self.distill not in DISTILL_METHODS:
            raise ValueError(f"distill must be one of {', '.join(DISTILL_METHODS)}")
        if self.distill_init not in DISTILL_INITS:
            raise ValueError(f"distill_init must be one of {', '.join(DISTILL_INITS)}")
        width = self.student_cnn_channels
        if not _count(width) or width > 256:
            raise ValueError("student_cnn_channels must be a whole number from 0 to 256")
        if width not in (0, self.cnn_channels) and self.distill_init != "scratch":
            raise ValueError(
                f"student_cnn_channels {width} differs from the members' cnn_channels"
                f" {self.cnn_channels}: such a student cannot start from a member's weights;"
                " set distill_init: scratch, or student_cnn_channels: 0 for the members' width"
            )
        if not isinstance(self.student_cnn_separable, bool):
            raise ValueError("student_cnn_separable must be true or false")
        if self.student_cnn_separable and not self.cnn_separable:
            if self.distill_init != "scratch":
                raise ValueError(
                    "student_cnn_separable gives the student another CNN than its members':"
                    " it cannot start from a member's weights; set distill_init: scratch"
                )
            if self.cnn_fine:
                raise ValueError("student_cnn_separable: the members' cnn_fine excludes it")
        if self.supervised_distill_steps < 0 or self.distill_rounds < 1:
            raise ValueError("supervised_distill_steps must be >= 0 and distill_rounds >= 1")
        if self.distill_passes <= 0 or self.distill_temperature <= 0 or self.distill_w_moves < 0:
            raise ValueError(
                "distill_passes and distill_temperature must be positive, distill_w_moves >= 0"
            )
        if not (math.isfinite(self.distill_mixup) and self.distill_mixup >= 0):
            raise ValueError("distill_mixup must be a finite number >= 0 (0: off)")
        if not _count(self.student_attempts) or self.student_attempts < 1:
            raise ValueError(
                f"student_attempts must be a whole number >= 1, got {self.student_attempts!r}"
            )
        for name in ("student_shortfall", "student_give_up", "student_give_up_margin"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 <= v <= 1.0:
                raise ValueError(f"{name} must be 0..1, got {v!r}")
        b = self.give_up_below
        if b is not None and (isinstance(b, bool) or not isinstance(b, (int, float))
                              or not math.isfinite(b)):  # fmt: skip
            raise ValueError(f"give_up_below must be a number or null (never), got {b!r}")
        for name in ("give_up_after", "give_up_patience", "student_give_up_patience"):
            if not _count(getattr(self, name)):
                raise ValueError(f"{name} must be a whole number >= 0, got {getattr(self, name)!r}")

    def minibatch(self) -> tuple[int, str | None]:
        """The PPO minibatch that fits a rollout of ``n_steps * n_envs`` steps, and a note
        when it is not ``batch_size``.

        SB3 warns (and trains a truncated minibatch) when the rollout is not a multiple
        of the batch: a batch larger than the rollout shrinks to the rollout, one that
        does not divide it to the largest size below it that does.
        """
        rollout = self.n_steps * self.n_envs
        batch = min(self.batch_size, rollout)
        while rollout % batch:
            batch -= 1
        if batch == self.batch_size:
            return batch, None
        return batch, (
            f"batch_size {self.batch_size} does not fit a rollout of n_steps {self.n_steps} x "
            f"n_envs {self.n_envs} = {rollout} steps: PPO uses minibatches of {batch} "
            f"(set batch_size to a divisor of {rollout} to choose)"
        )

    @classmethod
    def load(cls, path: str | Path, base: TrainConfig | None = None) -> TrainConfig:
        """Load from YAML (``file:line:col`` errors): the file's keys over ``base`` (None:
        the defaults), validated together."""
        return load_dataclass(cls, path, base=base)

    def to_yaml(self) -> str:
        """The config as YAML (written into the run directory)."""
        return yaml.safe_dump(dataclasses.asdict(self), sort_keys=False)

    def replace(self, **changes: object) -> TrainConfig:
        """A copy with ``changes`` (validated)."""
        new = dataclasses.replace(self, **changes)
        new.validate()
        return new
