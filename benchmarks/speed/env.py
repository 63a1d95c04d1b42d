"""Environment benchmark: InspectionEnv steps/s at 512x512 on one core, against a baseline.

Random actions (seeded) over ``reward_profiles/lcd_panel.yaml`` on 512x512
synthetic panels, measured two ways:

* **including resets**: the synthetic camera renders a new frame for every episode,
  as in training;
* **frames pre-rendered**: the same actions over frames rendered before the clock
  starts, so frame generation is out of the figure and what is left is the env.

The baseline, measured in the same run, is the bare pixel work of an observation:
the same sequence of crops on the same frames, each ``cv2.resize``-d to the glimpse
(copied when it is already native), plus one INTER_AREA overview per episode, with
no environment around it. The viewport geometry depends on the actions only, so the
crop sequence is recorded once and is the same for both env figures.

Run from the repository root::

    python -m benchmarks.speed.env [--quick]

Writes the ``env`` section of docs/benchmarks.md. Exit status 1 when a goal is missed.
"""

from __future__ import annotations

import cProfile
import pstats
import statistics
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from benchmarks.harness import ROOT, load_average, one_core, parser, table, write_section
from inspector.camera import CameraDriver, open_camera
from inspector.env import InspectionEnv
from inspector.frames import Frame
from inspector.scan import ACTIONS

PROFILE = str(ROOT / "reward_profiles" / "lcd_panel.yaml")
GOAL_STEPS = 5000.0
GOAL_OVERHEAD = 3.0


class PrerenderedCamera(CameraDriver):
    """Frames rendered before the clock starts, served by index (random access).

    Remembers which frame each episode drew, so the baseline can crop the same frames.

    :param frames: the frames to serve.
    """

    has_truth = True

    def __init__(self, frames: Sequence[Frame]) -> None:
        super().__init__()
        self._frames = list(frames)
        self.drawn: list[int] = []

    def __len__(self) -> int:
        return len(self._frames)

    def load(self, i: int) -> Frame:
        """Frame ``i``."""
        self.drawn.append(i)
        return self._frames[i]

    def frames(self) -> Iterator[Frame]:
        """The frames in order."""
        yield from self._frames


def random_actions(n: int, n_classes: int, seed: int = 0) -> list[tuple[int, int]]:
    """``n`` uniformly random (move, verdict) actions, fixed by ``seed``."""
    rng = np.random.default_rng(seed)
    moves = rng.integers(len(ACTIONS), size=n)
    verdicts = rng.integers(n_classes, size=n)
    return [(int(a), int(v)) for a, v in zip(moves, verdicts)]


@dataclass
class EnvTiming:
    """Seconds spent in one pass of the env over an action sequence."""

    steps: int
    episodes: int
    total_s: float
    step_s: float
    reset_s: float

    @property
    def steps_per_s(self) -> float:
        """Env steps per second, resets included."""
        return self.steps / self.total_s


def time_env(env: InspectionEnv, actions: Sequence[tuple[int, int]]) -> EnvTiming:
    """Step ``env`` through ``actions`` (resetting at episode ends) and time it.

    :param env: a fresh environment; it is reset with seed 0 first (timed as a reset).
    :param actions: the action sequence.
    """
    pc = time.perf_counter
    step_s = reset_s = 0.0
    episodes = 0
    start = pc()
    env.reset(seed=0)
    reset_s += pc() - start
    step = env.step
    for a in actions:
        t0 = pc()
        _, _, term, trunc, _ = step(a)
        t1 = pc()
        step_s += t1 - t0
        if term or trunc:
            env.reset()
            reset_s += pc() - t1
            episodes += 1
    return EnvTiming(len(actions), episodes, pc() - start, step_s, reset_s)


def record_crops(
    env: InspectionEnv, actions: Sequence[tuple[int, int]]
) -> list[tuple[int, int, int, int, int, int]]:
    """The crops the env takes for ``actions``: (episode, is_reset, x0, y0, x1, y1) each.

    A crop is taken at every reset and after every step that moved the viewport.
    """
    log = []
    episode = 0
    env.reset(seed=0)
    sc = env.scanner
    log.append((episode, 1, *sc.rect))
    looked = len(sc.path)
    for a in actions:
        _, _, term, trunc, _ = env.step(a)
        if len(sc.path) > looked:
            log.append((episode, 0, *sc.rect))
        if term or trunc:
            env.reset()
            episode += 1
            log.append((episode, 1, *sc.rect))
        looked = len(sc.path)
    return log


def time_bare(
    images: Sequence[np.ndarray],
    crops: Sequence[tuple[int, int, int, int, int, int]],
    glimpse: int,
    overview: int,
) -> float:
    """Seconds for the bare crop + cv2.resize work of ``crops`` on ``images``.

    :param images: the frame of each episode (index = episode).
    :param crops: from :func:`record_crops`.
    :param glimpse: glimpse side in pixels.
    :param overview: overview side in pixels.
    """
    import cv2

    g_dst = np.zeros((glimpse, glimpse), dtype=np.uint8)
    o_dst = np.zeros((overview, overview), dtype=np.uint8)
    area, linear = cv2.INTER_AREA, cv2.INTER_LINEAR
    size_g, size_o = (glimpse, glimpse), (overview, overview)
    resize = cv2.resize
    t0 = time.perf_counter()
    for ep, is_reset, x0, y0, x1, y1 in crops:
        img = images[ep]
        if is_reset:
            resize(img, size_o, dst=o_dst, interpolation=area)
        crop = img[y0:y1, x0:x1]
        if y1 - y0 == glimpse and x1 - x0 == glimpse:
            np.copyto(g_dst, crop)
        else:
            resize(crop, size_g, dst=g_dst, interpolation=area if y1 - y0 >= glimpse else linear)
    return time.perf_counter() - t0


@dataclass
class EnvBenchmark:
    """Medians over the repeats, in seconds per env step (and per episode for resets)."""

    steps: int
    episodes: int
    synthetic: float
    prerendered: float
    step_only: float
    reset_per_episode: float
    frame_per_episode: float
    bare: float
    repeats: int

    @property
    def overhead_synthetic(self) -> float:
        """Synthetic-frame env time over the bare crop cost."""
        return self.synthetic / self.bare

    @property
    def overhead_prerendered(self) -> float:
        """Pre-rendered-frame env time over the bare crop cost."""
        return self.prerendered / self.bare


def measure(
    size: int = 512,
    n_steps: int = 5000,
    repeats: int = 3,
    n_frames: int = 64,
    profile: str = PROFILE,
) -> EnvBenchmark:
    """Run the env benchmark (does not pin threads or CPUs; :func:`main` does).

    :param size: frame side in pixels.
    :param n_steps: env steps per repeat.
    :param repeats: repeats of each measurement (medians are reported).
    :param n_frames: frames pre-rendered for the pre-rendered pass and the baseline.
    :param profile: the reward profile.
    """
    params = {"size": size, "seed": 0}
    cam = open_camera("synthetic", params)
    frames = [cam.load(i) for i in range(n_frames)]
    pre = PrerenderedCamera(frames)
    env_pre = InspectionEnv(profile, pre)
    actions = random_actions(n_steps, len(env_pre.classes), seed=0)
    crops = record_crops(env_pre, actions)
    # Episode j of every pass draws the same frame: the env's RNG is seeded at reset.
    images = [frames[i].image for i in pre.drawn]
    g, o = env_pre.profile.scan.glimpse, env_pre.profile.scan.overview
    syn, prer, step_only, reset_ep, frame_ep, bare = [], [], [], [], [], []
    episodes = 0
    for _ in range(repeats):
        env = InspectionEnv(profile, "synthetic", params)
        t = time_env(env, actions)
        syn.append(t.total_s / t.steps)
        pre.drawn.clear()
        tp = time_env(InspectionEnv(profile, pre), actions)
        prer.append(tp.total_s / tp.steps)
        step_only.append(tp.step_s / tp.steps)
        reset_ep.append(tp.reset_s / (tp.episodes + 1))
        episodes = tp.episodes + 1
        # Frame generation alone, on random frame indices as training draws them.
        idx = [int(i) for i in np.random.default_rng(1).integers(2**31 - 1, size=200)]
        t0 = time.perf_counter()
        for i in idx:
            cam.load(i)
        frame_ep.append((time.perf_counter() - t0) / len(idx))
        bare.append(time_bare(images, crops, g, o) / n_steps)
    med = statistics.median
    return EnvBenchmark(
        steps=n_steps,
        episodes=episodes,
        synthetic=med(syn),
        prerendered=med(prer),
        step_only=med(step_only),
        reset_per_episode=med(reset_ep),
        frame_per_episode=med(frame_ep),
        bare=med(bare),
        repeats=repeats,
    )


def profile_env(size: int, n_steps: int, top: int = 10, profile: str = PROFILE) -> str:
    """A markdown table of where the env's time goes (cProfile, synthetic frames)."""
    env = InspectionEnv(profile, "synthetic", {"size": size, "seed": 0})
    actions = random_actions(n_steps, len(env.classes), seed=0)
    prof = cProfile.Profile()
    prof.enable()
    time_env(env, actions)
    prof.disable()
    stats = pstats.Stats(prof)
    total = stats.total_tt
    rows = []
    entries = sorted(stats.stats.items(), key=lambda kv: kv[1][2], reverse=True)[:top]
    root = str(ROOT) + "/"
    for (file, line, func), (_cc, ncalls, tottime, cumtime, _callers) in entries:
        where = func if file == "~" else f"{file.replace(root, '')}:{line} {func}"
        rows.append(
            [
                f"`{where}`",
                f"{ncalls:,}",
                f"{tottime:.3f} s ({100 * tottime / total:.0f} %)",
                f"{cumtime:.3f} s",
            ]
        )
    return (
        f"cProfile of {n_steps:,} steps with synthetic frames ({total:.2f} s under the "
        "profiler), top functions by own time:\n\n"
        + table(["function", "calls", "own time", "cumulative"], rows)
    )


def report(b: EnvBenchmark, threads: str, profile_md: str | None) -> tuple[str, bool]:
    """The markdown body and whether every goal is met."""
    rows = [
        [
            "env, including resets (new synthetic frame per episode)",
            f"{1 / b.synthetic:,.0f}",
            f"{b.synthetic * 1e6:,.1f}",
            f"{b.overhead_synthetic:,.1f}x",
        ],
        [
            "env, excluding frame generation (frames pre-rendered)",
            f"{1 / b.prerendered:,.0f}",
            f"{b.prerendered * 1e6:,.1f}",
            f"{b.overhead_prerendered:,.1f}x",
        ],
        [
            "of which `step()` alone (pre-rendered)",
            f"{1 / b.step_only:,.0f}",
            f"{b.step_only * 1e6:,.1f}",
            f"{b.step_only / b.bare:,.1f}x",
        ],
        [
            "baseline: bare crops + cv2.resize, same crops, same frames",
            f"{1 / b.bare:,.0f}",
            f"{b.bare * 1e6:,.1f}",
            "1.0x",
        ],
    ]
    steps_per_ep = b.steps / b.episodes
    per_ep = [
        ["`reset()` with a pre-rendered frame", f"{b.reset_per_episode * 1e6:,.0f}"],
        [
            "synthetic frame generation (`SyntheticCamera.load`)",
            f"{b.frame_per_episode * 1e6:,.0f}",
        ],
    ]
    ok_rate = 1 / b.synthetic >= GOAL_STEPS
    ok_rate_pre = 1 / b.prerendered >= GOAL_STEPS
    ok_over = b.overhead_prerendered <= GOAL_OVERHEAD
    ok_over_syn = b.overhead_synthetic <= GOAL_OVERHEAD

    def verdict(ok: bool) -> str:
        return "meets" if ok else "**MISSES**"

    body = (
        table(["what", "steps/s", "us/step", "time vs baseline"], rows)
        + "\n"
        + table(["per episode", "us"], per_ep)
        + f"\nOne core ({threads}); random actions (seed 0) over reward_profiles/lcd_panel.yaml, "
        f"512x512 frames, {b.steps:,} steps ({b.episodes:,} episodes, {steps_per_ep:.1f} steps "
        f"per episode) per pass, median of {b.repeats} passes.\n\n"
        "Goals:\n\n"
        f"- >= {GOAL_STEPS:,.0f} steps/s: including resets {1 / b.synthetic:,.0f} "
        f"({verdict(ok_rate)}); excluding frame generation {1 / b.prerendered:,.0f} "
        f"({verdict(ok_rate_pre)}).\n"
        f"- env overhead <= {GOAL_OVERHEAD:.0f}x the bare crop cost: excluding frame generation "
        f"{b.overhead_prerendered:.1f}x ({verdict(ok_over)}); including resets "
        f"{b.overhead_synthetic:.1f}x ({verdict(ok_over_syn)}).\n"
    )
    if profile_md:
        body += "\n" + profile_md
    return body, ok_rate and ok_over


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and write its section; return 0 (1 when a goal is missed)."""
    args = parser(__doc__, quick="fewer steps and repeats").parse_args(argv)
    threads = one_core()
    n, repeats = (5000, 3) if args.quick else (20000, 5)
    b = measure(512, n, repeats)
    met = 1 / b.synthetic >= GOAL_STEPS and b.overhead_prerendered <= GOAL_OVERHEAD
    profile_md = None if met else profile_env(512, n)
    body, ok = report(b, threads, profile_md)
    body += f"\nLoad average at the end: {load_average():.1f}.\n"
    cmd = "python -m benchmarks.speed.env" + (" --quick" if args.quick else "")
    print(body)
    if not args.no_write:
        print(f"wrote {write_section('env', 'Environment steps/s', body, cmd, doc=args.doc)}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
