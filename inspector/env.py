"""The gymnasium environment: inspect one part per episode.

Action space ``MultiDiscrete([A, C])``: the first component moves, zooms, jumps to a
tile or stops, from the profile's action table (:func:`inspector.scan.action_names`:
``scan.actions``; the default moves table has A = 7, ``stop`` is always last); the
second is the verdict over the profile's classes, read only on ``stop`` (the policy's
classifier head). Ending with a verdict pays the outcome terms; the profile's step
budget truncates the episode.

Rewards: each term of the profile is called in profile order after every step;
the returned reward is ``outcome_weight * outcome + process_weight * process``.
``info`` carries the true label (for the supervised part of the hybrid loss), the
raw value of every term, both channel sums and the shaping potential, so that the
RRM core can redistribute, shape and normalise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from inspector.camera import CameraDriver, open_camera
from inspector.errors import CameraError, InspectorError
from inspector.frames import Frame
from inspector.profile import Profile, load_profile
from inspector.rrm.step import INFO_KEY as STEP_KEY
from inspector.rrm.step import StepRecord
from inspector.scan import Scanner, action_names, observation_shapes
from inspector.terms import OUTCOME, EpisodeContext, StepContext


def resolve_profile(profile: str | Profile) -> Profile:
    """A :class:`Profile` from a path or a profile."""
    return profile if isinstance(profile, Profile) else load_profile(str(profile))


def env_spaces(profile: Profile) -> tuple[spaces.Dict, spaces.MultiDiscrete]:
    """The env's observation and action spaces (what a policy network is built from).

    :param profile: the reward profile (its scan settings and classes).
    """
    shapes = observation_shapes(profile.scan)
    observation = spaces.Dict(
        {
            "glimpse": spaces.Box(0, 255, shapes["glimpse"], dtype=np.uint8),
            "overview": spaces.Box(0, 255, shapes["overview"], dtype=np.uint8),
            "state": spaces.Box(-1.0, 1.0, shapes["state"], dtype=np.float32),
        }
    )
    n_actions = len(action_names(profile.scan))
    return observation, spaces.MultiDiscrete([n_actions, len(profile.classes)])


class FrameSource:
    """Frames for episodes: random access when the driver supports it, else a stream.

    :param driver: an open camera driver.
    :param indices: fixed frame indices to cycle through in order (evaluation), or None
        to sample uniformly with the environment's RNG (training).
    """

    def __init__(self, driver: CameraDriver, indices: Sequence[int] | None = None) -> None:
        self.driver = driver
        self.indices = list(indices) if indices is not None else None
        self._cursor = 0
        self._iter = None
        self.random_access = hasattr(driver, "load")
        try:
            self.length: int | None = len(driver)  # type: ignore[arg-type]
        except TypeError:
            self.length = None
        if self.length == 0:
            raise CameraError("the camera has no frames (empty folder or split?)")

    def next(self, rng: np.random.Generator) -> Frame:
        """The next frame for an episode (skips frames the driver reports as corrupt)."""
        for _ in range(1000):
            frame = self._draw(rng)
            if frame is not None:
                return frame
        raise CameraError("the camera returned 1000 unreadable frames in a row")

    def _draw(self, rng: np.random.Generator) -> Frame | None:
        if self.random_access:
            if self.indices is not None:
                i = self.indices[self._cursor % len(self.indices)]
                self._cursor += 1
            elif self.length is not None:
                i = int(rng.integers(self.length))
            else:
                i = int(rng.integers(2**31 - 1))
            return self.driver.load(i)  # type: ignore[attr-defined]
        if self._iter is None:
            self._iter = iter(self.driver)
        try:
            return next(self._iter)
        except StopIteration:
            self._iter = iter(self.driver)
            try:
                return next(self._iter)
            except StopIteration:
                raise CameraError("the camera stream ended and yields no frames") from None


class InspectionEnv(gym.Env):
    """Scan, focus and classify one part per episode.

    :param profile: path of a reward profile YAML, or a loaded :class:`Profile`.
    :param camera: a driver name (``synthetic``, ``folder`` ...) or an open driver.
    :param camera_params: parameters of the driver (strings are converted).
    :param frame_indices: fixed frames to cycle through (evaluation), default random.
    :param require_truth: refuse frames without a label (training needs them).
    :param teacher: also report the scripted teacher's action and verdict for the next
        observation (``info["teacher"]``/``["teacher_verdict"]`` at reset,
        ``info["teacher_next"]``/``["teacher_verdict_next"]`` per step). True uses the
        default teacher of the profile's action table (:func:`inspector.teacher.teacher_for`);
        pass one to configure it.
    :param render_mode: ``rgb_array`` draws the frame with the viewport.
    :param max_zoom: the search depth of the rollouts: an action that would look at a
        deeper zoom level is taken as ``stop`` (the verdict then declared), as the agent
        loop does for a model calibrated to that depth
        (:func:`inspector.policy.agent.run_episode`). None: every level.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 4}

    def __init__(
        self,
        profile: str | Profile,
        camera: str | CameraDriver = "synthetic",
        camera_params: Mapping[str, Any] | None = None,
        frame_indices: Sequence[int] | None = None,
        require_truth: bool = True,
        teacher: bool | Any = False,
        render_mode: str | None = None,
        max_zoom: int | None = None,
    ) -> None:
        super().__init__()
        self.profile = resolve_profile(profile)
        p = self.profile
        self.driver = (
            open_camera(camera, camera_params or {}) if isinstance(camera, str) else camera
        )
        self.source = FrameSource(self.driver, frame_indices)
        self.require_truth = require_truth
        self.teacher = teacher is not False and teacher is not None
        self._teacher: Any = None if isinstance(teacher, bool) or teacher is None else teacher
        self.render_mode = render_mode
        self.classes = p.classes
        self.class_index = {c: i for i, c in enumerate(p.classes)}
        self.terms = p.build_terms()
        self.term_names = [t.term for t in p.terms]
        self.potential = p.build_potential()
        self.outcome_weight = p.rrm.outcome_weight
        self.process_weight = p.rrm.process_weight
        self.scanner = Scanner(p.scan, p.step_budget)
        self.max_zoom = max_zoom
        self.observation_space, self.action_space = env_spaces(p)
        self.frame: Frame | None = None
        self._episode: EpisodeContext | None = None
        self._label_idx = -1
        self._phi = 0.0
        self._done = True

    # -- helpers ----------------------------------------------------------------
    def _label_of(self, frame: Frame) -> str | None:
        if frame.truth is None:
            if self.require_truth:
                raise InspectorError(
                    f"frame {frame.part_id} from {frame.source} has no label; training and "
                    "evaluation need labelled frames"
                )
            return None
        label = frame.truth.label
        if label not in self.class_index:
            raise InspectorError(
                f"frame {frame.part_id} has label {label!r}, which is not a class of profile "
                f"{self.profile.name!r} ({', '.join(self.classes)})"
            )
        return label

    def _context(self, action: str, verdict: str | None = None, **kw: Any) -> StepContext:
        sc = self.scanner
        return StepContext(
            episode=self._episode,
            step=sc.steps - 1,
            action=action,
            rect=sc.rect,
            level=sc.level,
            native=sc.native,
            glimpse=sc._glimpses[0],
            moved=kw.pop("moved", True),
            revisit=kw.pop("revisit", False),
            verdict=verdict,
            extra={"levels": sc.levels},
            **kw,
        )

    def _potential(self, ctx: StepContext) -> float:
        if self.potential is None:
            return 0.0
        return float(self.profile.rrm.shaping.scale * self.potential.potential(ctx))

    def teacher_action(self) -> int:
        """The scripted teacher's action in the current state (``teacher=True`` only)."""
        if self._teacher is None:
            raise InspectorError("teacher_action() needs InspectionEnv(..., teacher=True)")
        return int(self._teacher.act(self.scanner))

    def teacher_verdict(self) -> int:
        """The verdict the observations support so far (class index; -1 unlabelled).

        The true class once the teacher has had the defect in sight, the ok class
        before; the true label when the frame has no defect mask to judge sight by.
        Call after :meth:`teacher_action` for the same state.
        """
        if self._label_idx < 0 or self._teacher is None:
            return self._label_idx
        if self._teacher.mask is None or self._teacher.seen:
            return self._label_idx
        if self.profile.ok_class is None:
            # Every part has a defect: before it is in sight nothing supports another class.
            return self._label_idx
        return self.class_index[self.profile.ok_class]

    # -- gymnasium API ----------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        super().reset(seed=seed)
        frame = (options or {}).get("frame") or self.source.next(self.np_random)
        self.frame = frame
        label = self._label_of(frame)
        self._label_idx = self.class_index[label] if label is not None else -1
        obs = self.scanner.reset(frame.image)
        mask = None
        if frame.truth is not None:
            mask = frame.truth.defect_mask(frame.shape)
        self._episode = EpisodeContext(
            frame=frame,
            label=label,
            defect_mask=mask,
            classes=self.classes,
            ok_class=self.profile.ok_class,
            budget=self.profile.step_budget,
        )
        for t in self.terms:
            t.reset(self._episode)
        if self.potential is not None:
            self.potential.reset(self._episode)
        self._phi = self._potential(self._context("reset"))
        self._done = False
        info: dict[str, Any] = {
            "label": self._label_idx,
            "part_id": frame.part_id,
            "phi": self._phi,
        }
        if self.teacher:
            from inspector.teacher import teacher_for

            if self._teacher is None:
                self._teacher = teacher_for(self.scanner)
            self._teacher.reset(self.scanner, mask)
            info["teacher"] = self.teacher_action()
            info["teacher_verdict"] = self.teacher_verdict()
        return obs, info

    def step(self, action: Any) -> tuple[dict[str, np.ndarray], float, bool, bool, dict]:
        if self._done:
            raise InspectorError("step() called on a finished episode; call reset() first")
        act = np.asarray(action).reshape(-1)
        a = int(act[0])
        v = int(act[1]) if act.size > 1 else 0
        if self.max_zoom is not None and self.scanner.level_after(a) > self.max_zoom:
            a = self.scanner.stop
        obs, moved, revisit = self.scanner.step(a)
        terminated = a == self.scanner.stop
        truncated = (not terminated) and self.scanner.steps >= self.profile.step_budget
        verdict = self.classes[v] if terminated else None
        ctx = self._context(
            self.scanner.actions[a],
            verdict,
            moved=moved,
            revisit=revisit,
            terminated=terminated,
            truncated=truncated,
        )
        values = [float(t(ctx)) for t in self.terms]
        outcome = sum(x for x, t in zip(values, self.terms) if t.channel == OUTCOME)
        process = sum(values) - outcome
        phi_prev = self._phi
        phi = 0.0 if terminated else self._potential(ctx)
        self._phi = phi
        w_outcome, w_process = self.outcome_weight * outcome, self.process_weight * process
        reward = w_outcome + w_process
        self._done = terminated or truncated
        info: dict[str, Any] = {
            "reward": float(reward),
            "label": self._label_idx,
            "terms": dict(zip(self.term_names, values)),
            "outcome": outcome,
            "process": process,
            "phi_prev": phi_prev,
            "phi": phi,
            "native": self.scanner.native,
        }
        teacher_next = teacher_verdict_next = -1
        if self.teacher and not self._done:
            teacher_next, teacher_verdict_next = self.teacher_action(), self.teacher_verdict()
            info["teacher_next"] = teacher_next
            info["teacher_verdict_next"] = teacher_verdict_next
        info[STEP_KEY] = StepRecord(
            reward=float(reward),
            outcome=float(w_outcome),
            process=float(w_process),
            phi_prev=float(phi_prev),
            phi=float(phi),
            label=int(self._label_idx),
            teacher_next=int(teacher_next),
            teacher_verdict_next=int(teacher_verdict_next),
        )
        if self._done:
            info["verdict"] = v if terminated else -1
            info["correct"] = bool(terminated and v == self._label_idx)
            info["steps"] = self.scanner.steps
            info["pixel_fraction"] = self.scanner.pixel_fraction()
        return obs, float(reward), terminated, truncated, info

    def render(self) -> np.ndarray | None:
        if self.render_mode != "rgb_array" or self.frame is None:
            return None
        import cv2

        img = cv2.cvtColor(self.scanner.image, cv2.COLOR_GRAY2BGR)
        x0, y0, x1, y1 = self.scanner.rect
        cv2.rectangle(img, (x0, y0), (x1 - 1, y1 - 1), (0, 0, 255), 1)
        return img[:, :, ::-1].copy()

    def close(self) -> None:
        self.driver.close()
