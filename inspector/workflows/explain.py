"""``profile explain``: reward traces an engineer can read.

Runs episodes with the scripted searching teacher (or a trained model),
records every step (action, viewport, each term's raw value and channel, the
redistributed and the shaped reward), prints one episode as a table, writes all
traces as JSON and draws a figure.

``redistributed`` is the channel-weighted reward after redistribution of the
outcome channel; ``shaped`` adds the potential-based shaping term. Redistribution
preserves each episode's return (``return_redistributed == return_raw``); shaping
changes it by design (its discounted sum is -Phi(s_0)).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from inspector.camera import parse_params
from inspector.errors import InspectorError
from inspector.profile import Profile, load_profile
from inspector.rrm.learned import LearnedRedistributor, episode_features
from inspector.rrm.redistribution import redistribute
from inspector.rrm.shaping import shaping_rewards
from inspector.rrm.step import INFO_KEY as STEP_KEY
from inspector.scan import action_names

GAMMA = 0.99


def record_episodes(
    profile: Profile,
    camera: str,
    params: dict[str, Any],
    episodes: int,
    seed: int = 0,
    model: str | None = None,
) -> list[dict[str, Any]]:
    """Run ``episodes`` episodes and return raw traces (before redistribution)."""
    from inspector.env import InspectionEnv

    env = InspectionEnv(profile, camera, params, teacher=model is None)
    policy = None
    if model is not None:
        from inspector.train.torch_policy import load_any_policy

        policy = load_any_policy(model)
    traces = []
    try:
        for ep in range(episodes):
            obs, info = env.reset(seed=seed + ep)
            label = info["label"]
            steps, feats_obs = [], []
            nxt = info.get("teacher", 0)
            done = False
            while not done:
                if policy is not None:
                    a, probs = policy.act(obs)
                    verdict = profile.classes.index(policy.verdict(probs))
                else:
                    a, verdict = int(nxt), max(0, label)
                feats_obs.append((obs["glimpse"], obs["state"], a))
                obs, r, term, trunc, info = env.step([a, verdict])
                nxt = info.get("teacher_next", 0)
                done = term or trunc
                sc = env.scanner
                rec = info[STEP_KEY]
                steps.append(
                    {
                        "step": len(steps),
                        "action": sc.actions[a],
                        "viewport": {"x": sc.cx, "y": sc.cy, "zoom": sc.level},
                        "rect": list(sc.rect),
                        "terms": info["terms"],
                        "channels": {t.term: t.channel for t in profile.terms},
                        "outcome": rec.outcome,
                        "process": rec.process,
                        "raw": r,
                        "phi_prev": rec.phi_prev,
                        "phi": rec.phi,
                    }
                )
            traces.append(
                {
                    "part_id": env.frame.part_id,
                    "label": profile.classes[label] if label >= 0 else None,
                    "verdict": profile.classes[info["verdict"]] if info["verdict"] >= 0 else None,
                    "frame": env.frame,
                    "path": [(p.x, p.y, p.zoom) for p in sc.path],
                    "steps": steps,
                    "_features": feats_obs,
                }
            )
    finally:
        env.close()
    return traces


def redistribute_traces(profile: Profile, traces: list[dict[str, Any]], seed: int = 0) -> None:
    """Fill ``redistributed`` and ``shaped`` in every step, and the per-episode returns."""
    red = profile.rrm.redistribution
    rng = np.random.default_rng(seed)
    outcomes = [np.array([s["outcome"] for s in t["steps"]]) for t in traces]
    if red.method == "learned":
        feats = []
        for t in traces:
            g = np.stack([f[0] for f in t["_features"]])
            st = np.stack([f[1] for f in t["_features"]])
            a = np.array([f[2] for f in t["_features"]])
            feats.append(episode_features(g, st, a, len(action_names(profile.scan))))
        model = LearnedRedistributor(feats[0].shape[1], hidden=red.hidden, lr=red.lr, seed=seed)
        for _ in range(20):
            model.fit(feats, outcomes)
        moved = model.redistribute(feats, outcomes)
    else:
        moved = [
            redistribute(o, red.method, lam=red.lam, window=red.window, rng=rng) for o in outcomes
        ]
    for t, o in zip(traces, moved):
        proc = np.array([s["process"] for s in t["steps"]])
        f = np.zeros_like(proc)
        if profile.rrm.shaping.potential is not None:
            f = shaping_rewards(
                np.array([s["phi_prev"] for s in t["steps"]]),
                np.array([s["phi"] for s in t["steps"]]),
                GAMMA,
            )
        for s, ro, fs in zip(t["steps"], o, f):
            s["redistributed"] = float(ro + s["process"])
            s["shaping"] = float(fs)
            s["shaped"] = float(ro + s["process"] + fs)
        t["return_raw"] = float(sum(s["raw"] for s in t["steps"]))
        t["return_redistributed"] = float(sum(s["redistributed"] for s in t["steps"]))
        t["return_shaped"] = float(sum(s["shaped"] for s in t["steps"]))


def print_table(profile: Profile, trace: dict[str, Any]) -> None:
    """One episode, one line per step."""
    names = [t.term for t in profile.terms]
    short = [n[:11] for n in names]
    head = f"{'step':>4} {'action':<8} {'zoom':>4} " + " ".join(f"{n:>11}" for n in short)
    head += f" {'raw':>8} {'redist':>8} {'shaped':>8}"
    print(f"part {trace['part_id']}: truth {trace['label']}, verdict {trace['verdict']}")
    print(head)
    for s in trace["steps"]:
        vals = " ".join(f"{s['terms'].get(n, 0.0):>11.3f}" for n in names)
        print(
            f"{s['step']:>4} {s['action']:<8} {s['viewport']['zoom']:>4} {vals} "
            f"{s['raw']:>8.3f} {s['redistributed']:>8.3f} {s['shaped']:>8.3f}"
        )
    print(
        f"return raw {trace['return_raw']:.4f}, redistributed "
        f"{trace['return_redistributed']:.4f}, shaped {trace['return_shaped']:.4f}"
    )


def plot_trace(profile: Profile, trace: dict[str, Any], out: Path) -> None:
    """Stacked per-term rewards, the redistributed reward over them, and the glimpse path."""
    from inspector.report import draw_path, pyplot
    from inspector.scan import PathPoint

    plt = pyplot()
    names = [t.term for t in profile.terms]
    steps = trace["steps"]
    x = np.arange(len(steps))
    fig, (ax, axp) = plt.subplots(1, 2, figsize=(11, 4), gridspec_kw={"width_ratios": [2, 1]})
    pos = np.zeros(len(steps))
    neg = np.zeros(len(steps))
    cmap = plt.get_cmap("tab10")
    for k, n in enumerate(names):
        v = np.array([s["terms"].get(n, 0.0) for s in steps])
        if not np.any(v):
            continue
        base = np.where(v >= 0, pos, neg)
        ax.bar(x, v, bottom=base, color=cmap(k % 10), label=f"{n} ({profile.terms[k].channel})")
        pos += np.where(v >= 0, v, 0)
        neg += np.where(v < 0, v, 0)
    ax.plot(x, [s["redistributed"] for s in steps], "k.-", label="redistributed")
    if profile.rrm.shaping.potential:
        ax.plot(x, [s["shaped"] for s in steps], "m.--", label="shaped")
    ax.axhline(0, color="gray", lw=0.5)
    ax.set_xticks(x, [s["action"] for s in steps], rotation=45, ha="right", fontsize=8)
    ax.set_ylabel("reward")
    ax.set_title(
        f"{profile.name} ({profile.rrm.redistribution.method}): truth {trace['label']}, "
        f"verdict {trace['verdict']}",
        fontsize=9,
    )
    ax.legend(fontsize=7, loc="best")
    frame = trace["frame"]
    path = [PathPoint(*p) for p in trace["path"]]
    draw_path(axp, frame.gray, path, profile.scan.zoom_levels, profile.scan.glimpse)
    if frame.truth is not None and frame.truth.mask is not None:
        import cv2

        cs, _ = cv2.findContours(
            (frame.truth.mask > 0).astype(np.uint8), cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE
        )
        for c in cs:
            c = c.reshape(-1, 2)
            axp.plot(c[:, 0], c[:, 1], "c-", lw=1)
    axp.set_title("glimpse path (defect outlined)", fontsize=9)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=90)
    plt.close(fig)


def run_explain(args: argparse.Namespace) -> int:
    """Handler of ``inspector profile explain``."""
    if args.episodes < 1:
        raise InspectorError(f"--episodes must be positive, got {args.episodes}")
    profile = load_profile(args.file)
    traces = record_episodes(
        profile, args.camera, parse_params(args.param), args.episodes, args.seed, args.model
    )
    redistribute_traces(profile, traces, args.seed)
    print_table(profile, traces[0])
    if args.json:
        doc = {
            "profile": profile.name,
            "profile_sha256": profile.sha256,
            "redistribution": profile.rrm.redistribution.method,
            "episodes": [
                {k: v for k, v in t.items() if k not in ("frame", "_features")} for t in traces
            ],
        }
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(doc, indent=1))
    if args.plot:
        # The most informative episode: a defective part if there is one.
        pick = next((t for t in traces if t["label"] != profile.ok_class), traces[0])
        plot_trace(profile, pick, Path(args.plot))
    return 0
