"""Keep the best model on held-out labelled frames, not the last one.

PPO can wear a good model down: on unseen magnetic-tile footage one run reached 0.95 at
150k steps and, trained on, fell to one glimpse per part and 0.90 at 340k. So a run
checks its model on val frames after pretraining, every ``select_interval`` steps of
PPO and at the end, saves the best checked model as ``best.zip``, and ends with that
one as ``model.zip`` when the last one is worse. ``select.json`` records every check,
the kept model and why, and on which frames; a resumed run continues it.

The val frames are labelled frames held out from training and never the test split:
``TrainConfig.val_camera_params`` when given, else derived from the training camera
(:func:`val_params`).
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from inspector.errors import InspectorError
from inspector.train.config import TrainConfig
from inspector.train.give_up import give_up_words, gives_up

log = logging.getLogger(__name__)

FILE = "select.json"
BEST = "best.zip"
#: The synthetic camera's val frames: the training seed plus this (another panel set).
SYNTHETIC_VAL_SEED_OFFSET = 1000
#: Splits never used to choose anything.
NEVER = ("test", "heldout")
#: The ``when`` of the check of the last model.
END = "end of training"


def val_params(
    camera: str, params: Mapping[str, Any], cfg: TrainConfig
) -> tuple[dict[str, Any] | None, str]:
    """The camera parameters of the held-out labelled frames, and how they were found.

    ``cfg.val_camera_params`` when given; else a training ``split: train`` becomes
    ``split: val`` (a manifest's val split) and the synthetic camera gets another seed;
    otherwise none. A derived source that cannot be opened or is empty counts as none.

    :returns: (parameters or None, a sentence for the report).
    :raises InspectorError: explicit val parameters that name the test or held-out split.
    """
    base = dict(params)
    if cfg.val_camera_params:
        out = {**base, **cfg.val_camera_params}
        if str(out.get("split", "")).lower() in NEVER:
            raise InspectorError(
                f"val_camera_params name the {out['split']} split: the kept model and the"
                " operating point are chosen on val frames, never on test or held-out ones"
            )
        return out, "val_camera_params"
    if camera == "synthetic":
        seed = int(base.get("seed", 0)) + SYNTHETIC_VAL_SEED_OFFSET
        return {**base, "seed": seed}, f"synthetic panels of another seed ({seed})"
    if str(base.get("split", "")).lower() != "train":
        return None, "no val split derivable from the camera (training is not on split=train)"
    out, why = _other_split(camera, base, "val")
    return out, why or "the val split of the training source"


#: The held-out splits a closing evaluation looks for, in order: a manifest's ``test``,
#: a footage store's ``heldout``.
HELD_OUT = ("test", "heldout")


def eval_params(
    camera: str, params: Mapping[str, Any], cfg: TrainConfig
) -> tuple[dict[str, Any] | None, str]:
    """The camera parameters of the closing evaluation's frames, and how they were found.

    ``cfg.eval_camera_params`` when given (the user's choice; the report names the
    frames' role); the synthetic camera: its fixed evaluation block; else a training
    ``split: train`` becomes the source's held-out split (a manifest's ``test``, a
    footage store's ``heldout``), never the frames it trained or chose on. None where
    no held-out frames exist: the run then says so instead of judging its training frames.

    :returns: (parameters or None, a sentence for the report).
    """
    base = dict(params)
    if cfg.eval_camera_params:
        return {**base, **cfg.eval_camera_params}, "eval_camera_params"
    if camera == "synthetic":
        return base, "the synthetic camera's fixed evaluation block"
    if str(base.get("split", "")).lower() != "train":
        return None, (
            "no held-out frames: training is not on split=train of a manifest or a footage"
            " store, so every frame may have been trained on"
        )
    reasons = []
    for split in HELD_OUT:
        out, why = _other_split(camera, base, split)
        if out is not None:
            return out, f"the {split} split of the training source"
        reasons.append(why)
    return None, "no held-out frames: " + "; ".join(reasons)


def _other_split(
    camera: str, base: Mapping[str, Any], split: str
) -> tuple[dict[str, Any] | None, str]:
    """``base`` with another ``split``, if that opens with frames: (parameters, "") or
    (None, why not)."""
    from inspector.camera import open_camera

    out = {**base, "split": split}
    try:
        driver = open_camera(camera, out)
    except InspectorError as exc:
        return None, f"no {split} split ({exc})"
    try:
        n = len(driver)
    except TypeError:
        n = None
    finally:
        driver.close()
    if n == 0:
        return None, f"the {split} split is empty"
    return out, ""


#: The figure the ``operating_point`` metric reads at the chosen bias, per objective.
OBJECTIVE_FIGURE = {
    "balanced": "balanced_accuracy",
    "max_false_alarms": "defect_recall",
    "min_recall": "ok_rate",
    "none": "balanced_accuracy",
}


def _other(metric: str) -> str:
    """The tie-breaker of a metric."""
    return "balanced_accuracy" if metric == "defect_auroc" else "defect_auroc"


def _key(entry: Mapping[str, Any], metric: str) -> tuple[float, float]:
    def num(v: Any) -> float:
        return -1.0 if v is None else float(v)

    return num(entry.get(metric)), num(entry.get(_other(metric)))


def better_or_equal(entry: Mapping[str, Any], best: Mapping[str, Any], metric: str) -> bool:
    """Whether a check is at least as good as the kept one (equal keeps the later)."""
    return _key(entry, metric) >= _key(best, metric)


def operating_score(
    probs: Any, labels: Any, outcome_matrix: Any, cfg: TrainConfig
) -> tuple[float | None, float | None]:
    """The ``operating_point`` figure of a model on val: (figure, the ok bias it is at).

    The run's objective chooses the bias on these parts exactly as the end of training
    will (``none``: bias 0); the figure is what that objective maximises there. None
    where no bias meets the objective's target on these parts.
    """
    import math

    from inspector.policy.operating_point import choose_bias, rates_at
    from inspector.train.calibration import held_confidence

    objective = cfg.operating_point
    if objective == "none":
        bias, at = 0.0, rates_at(probs, labels, outcome_matrix, 0.0)
    else:
        try:
            bias, at = choose_bias(
                probs,
                labels,
                outcome_matrix,
                objective,
                cfg.operating_target,
                confidence=held_confidence(cfg),
            )
        except InspectorError:
            return None, None
    at = {**at, "ok_rate": 1.0 - at["false_alarm_rate"]}
    value = at[OBJECTIVE_FIGURE[objective]]
    return (None if math.isnan(value) else float(value)), float(bias)


def metric_words(cfg: TrainConfig) -> str:
    """What decides the kept model, in words (for the report)."""
    metric = cfg.select_metric
    if metric == "defect_auroc":
        return "val defect AUROC (threshold-free; ties: balanced accuracy at ok bias 0)"
    if metric == "balanced_accuracy":
        return "val balanced accuracy at ok bias 0 (ties: defect AUROC)"
    objective, target = cfg.operating_point, cfg.operating_target
    if objective == "max_false_alarms":
        where = f"at the ok bias chosen there for false alarms <= {target:g}"
    elif objective == "min_recall":
        where = f"at the ok bias chosen there for defect recall >= {target:g}"
    elif objective == "balanced":
        where = "at the ok bias the balanced objective chooses there"
    else:
        where = "at ok bias 0 (no operating point is chosen)"
    from inspector.train.calibration import held_confidence

    if held_confidence(cfg) is not None:
        where += f" at {cfg.operating_confidence:g} confidence"
    figure = {
        "balanced_accuracy": "balanced accuracy",
        "defect_recall": "defect recall",
        "ok_rate": "1 - false-alarm rate",
    }[OBJECTIVE_FIGURE[objective]]
    return f"val {figure} {where} (ties: defect AUROC)"


FIGURES = (
    "accuracy",
    "balanced_accuracy",
    "defect_recall",
    "false_alarm_rate",
    "defect_auroc",
    "mean_steps",
    "native_share",
)


def policy_figures(
    policy: Any, camera: str, params: Mapping[str, Any], cfg: TrainConfig
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A policy's figures on the frames of ``params`` as a val check computes them
    (``cfg.select_episodes`` parts, the check's search depth; with ``select_metric:
    operating_point`` the figure at the bias the run's objective chooses there):
    (figures, every metric). Any policy: a training model's, an ensemble's."""
    from inspector.train.evaluate import decision_probabilities, metrics, run_parts

    labels, decisions, _ = run_parts(
        policy, camera, params, cfg.select_episodes, max_zoom=check_depth(cfg)
    )
    meta = policy.meta
    m = metrics(meta.classes, meta.ok_class, labels, decisions)
    figures = {k: m[k] for k in FIGURES} | {"parts": m["episodes"]}
    if cfg.select_metric == "operating_point" and meta.classification_only:
        # No ok class, no ok bias: the verdict is the likeliest class as it stands.
        figures |= {"operating_point": figures["balanced_accuracy"], "ok_bias": 0.0}
    elif cfg.select_metric == "operating_point":
        probs, y = decision_probabilities(meta.classes, labels, decisions)
        score, bias = operating_score(probs, y, meta.outcome_matrix, cfg)
        figures |= {"operating_point": score, "ok_bias": bias}
    return figures, m


class BestOnVal:
    """Checks a model on the val frames and keeps the best one in ``out/best.zip``.

    :param out: the run directory.
    :param profile: the loaded profile (classes, scan, outcome values).
    :param camera: the driver; ``params`` the val frames' parameters.
    :param cfg: the run's TrainConfig (interval, parts per check, metric).
    :param source: how the val frames were found (for the report).
    :param fresh: a new run: forget the checks and best model of an earlier run there.
    :param clock: counts the checks' CPU time (:mod:`inspector.train.phases`).
    """

    def __init__(
        self,
        out: Path,
        profile: Any,
        camera: str,
        params: Mapping[str, Any],
        cfg: TrainConfig,
        source: str = "",
        fresh: bool = True,
        clock: Any = None,
    ) -> None:
        self.out = Path(out)
        self.clock = clock
        self.profile = profile
        self.camera = camera
        self.params = dict(params)
        self.cfg = cfg
        self.source = source
        path = self.out / FILE
        if fresh:
            path.unlink(missing_ok=True)
            (self.out / BEST).unlink(missing_ok=True)
        self.state: dict[str, Any] = (
            json.loads(path.read_text()) if path.is_file() else {"checks": [], "best": None}
        )

    # -- checking -------------------------------------------------------------------------

    def evaluate(self, model: Any) -> tuple[dict[str, Any], Any]:
        """The model's figures on the val frames: (figures, decisions' probabilities)."""
        from inspector.train.torch_policy import TorchPolicy, meta_for_model

        training = model.policy.training
        model.policy.set_training_mode(False)
        try:
            policy = TorchPolicy(model, meta_for_model(model, self.profile))
            return policy_figures(policy, self.camera, self.params, self.cfg)
        finally:
            model.policy.set_training_mode(training)

    def check(self, model: Any, when: str) -> dict[str, Any]:
        """Check ``model`` now; save it as best.zip when it is the best so far."""
        if self.clock is not None:
            with self.clock.phase("val_checks"):
                return self._check(model, when)
        return self._check(model, when)

    def _check(self, model: Any, when: str) -> dict[str, Any]:
        figures, _ = self.evaluate(model)
        entry = {"steps": int(model.num_timesteps), "when": when, **figures}
        best = self.state["best"]
        if best is None or better_or_equal(entry, best, self.cfg.select_metric):
            tmp = self.out / ".best.tmp.zip"
            model.save(str(tmp))
            tmp.replace(self.out / BEST)
            self.state["best"] = entry
        self.state["checks"].append(entry)
        now = None  # the run gives up at this check (said once, not again at the end)
        if when != END and not self.gave_up:
            now = self.state["gave_up"] = gives_up(self.cfg, self.state["checks"])
        self._save()
        metric = self.cfg.select_metric
        log.info("val check at %d steps (%s): %s %s", entry["steps"], when, metric, entry[metric])
        if now:
            log.warning("%s: %s", self.out.name, give_up_words(now, metric))
        return entry

    @property
    def gave_up(self) -> dict[str, Any] | None:
        """Where the run gave up (``give_up_below``), None while it goes on."""
        return self.state.get("gave_up")

    def _save(self) -> None:
        tmp = self.out / ".select.json.tmp"
        tmp.write_text(json.dumps(self.state, indent=1))
        tmp.replace(self.out / FILE)

    def callback(self):
        """An SB3 callback: a check before PPO (after pretraining) and every interval."""
        from stable_baselines3.common.callbacks import BaseCallback

        sel = self

        class SelectCallback(BaseCallback):
            def _on_training_start(self) -> None:
                checks = sel.state["checks"]
                self.last = checks[-1]["steps"] if checks else self.num_timesteps
                if not checks:
                    sel.check(self.model, "before PPO (after pretraining)")

            def _on_rollout_start(self) -> None:
                # The previous rollout is fully trained here, as for checkpoints.
                every = sel.cfg.select_interval
                if every and self.num_timesteps - self.last >= every:
                    sel.check(self.model, "during PPO")
                    self.last = self.num_timesteps

            def _on_step(self) -> bool:
                return not sel.gave_up  # False stops PPO: the run gave up

        return SelectCallback()

    # -- the end of the run ---------------------------------------------------------------

    def finish(self, model: Any) -> dict[str, Any]:
        """Check the last model, keep the best as model.zip, and say which and why.

        :returns: the ``kept`` section of report.json (also in select.json).
        """
        last = self.check(model, END)
        best = self.state["best"]
        metric = self.cfg.select_metric
        kept_last = best is last or best == last
        if not kept_last:
            tmp = self.out / ".model.tmp.zip"
            shutil.copyfile(self.out / BEST, tmp)
            tmp.replace(self.out / "model.zip")
        n_checks = len(self.state["checks"])
        other = _other(metric)
        name = metric.replace("_", " ")
        tie = (
            f", ties broken by val {other.replace('_', ' ')}"
            if any(
                c["steps"] != best["steps"] and c.get(metric) == best.get(metric)
                for c in self.state["checks"]
            )
            else ""
        )
        if kept_last:
            why = (
                f"the last model has the highest val {name} of"
                f" {n_checks} checks ({_f(best.get(metric))}{tie})"
            )
        else:
            why = (
                f"the model at {best['steps']:,} steps ({best['when']}) has the highest"
                f" val {name} of {n_checks} checks ({_f(best.get(metric))}"
                f"{tie}); the last model had {_f(last.get(metric))}"
            )
        if self.gave_up:
            why += f"; {give_up_words(self.gave_up, metric)}"
        kept = {
            "checkpoint": "last" if kept_last else BEST,
            "steps": best["steps"],
            "when": best["when"],
            "metric": metric,
            "decided_by": metric_words(self.cfg),
            "why": why,
            "val": {k: best.get(k) for k in (*FIGURES, "operating_point", "ok_bias") if k in best},
            "frames": frames_doc(self.camera, self.params, best.get("parts", 0), self.source),
            "checks": [
                {
                    k: c.get(k)
                    for k in ("steps", "when", metric, "balanced_accuracy", "defect_auroc")
                }
                for c in self.state["checks"]
            ],
        }
        if self.gave_up:
            kept["gave_up"] = self.gave_up
        self.state["kept"] = kept
        self._save()
        return kept


def check_depth(cfg: TrainConfig) -> int | None:
    """The search depth the val checks judge a model at: the rollouts' depth, else a
    fixed ``search_depth`` (the depth the model will run at, e.g. the one ``train
    --members`` gives its student), else every level (``auto`` and ``full``: the depth
    is chosen after training, or there is none)."""
    if cfg.rollout_max_zoom is not None:
        return cfg.rollout_max_zoom
    depth = cfg.search_depth
    return depth if isinstance(depth, int) and not isinstance(depth, bool) else None


def frames_doc(camera: str, params: Mapping[str, Any], count: int, source: str = "") -> dict:
    """Which frames something was chosen on: camera, parameters, split, count."""
    doc = {
        "camera": camera,
        "params": {k: str(v) for k, v in params.items()},
        "split": str(params["split"]) if "split" in params else None,
        "count": int(count),
    }
    if source:
        doc["source"] = source
    return doc


def no_val_doc(reason: str) -> dict[str, Any]:
    """The ``kept`` section when there are no val frames: the last model, and why."""
    return {
        "checkpoint": "last",
        "why": f"no held-out labelled frames ({reason}): kept the last model; give "
        "val_camera_params (e.g. split: val) to keep the best one",
        "frames": None,
    }


def no_eval_doc(reason: str) -> dict[str, Any]:
    """report.json's ``evaluation`` section when there are no held-out frames."""
    return {
        "ran": False,
        "why": f"{reason}; judge the model on frames it never saw with inspector eval RUN"
        " --camera ... (or give eval_camera_params)",
    }


def _f(v: Any) -> str:
    return "n/a" if v is None else f"{float(v):.3f}"
