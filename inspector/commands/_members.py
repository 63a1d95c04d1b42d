"""``train --members K [--ray ADDRESS]``: the flags and the handler (see
:mod:`inspector.train.members` and :mod:`inspector.train.cluster`)."""

from __future__ import annotations

import argparse
import os

from inspector.commands._args import non_negative_int, positive_int


def add_members_arguments(p: argparse.ArgumentParser) -> None:
    """The ``--members`` flags of ``train``."""
    g = p.add_argument_group(
        "members, ensemble and student",
        "--members K trains K members (seeds --seed .. --seed+K-1) into OUT/members/, builds"
        " their verdict ensemble in OUT/ensemble/ and distils it into one student in"
        " OUT/student/ (export either); OUT/report.md puts their figures side by side."
        " The student starts from the member with the best val figure and learns the"
        " ensemble's verdict and moves on the states it visits (config distill:"
        " supervised, distill_init: best; distill: ppo for the hybrid loss's KL term)."
        " A student more than student_shortfall (0.03) below the ensemble's val figure is"
        " distilled again with the next seed (OUT/student_2, up to student_attempts: 2) and"
        " the better one on val kept (a student that is not the last gives up from half its"
        " steps on when still more than student_give_up_margin, 0.06, below the ensemble"
        " and no longer rising);"
        " the report and the last lines name it",
    )
    g.add_argument(
        "--members",
        type=positive_int,
        default=1,
        metavar="K",
        help="members to train (default 1: one run, no ensemble)",
    )
    g.add_argument(
        "--distill-timesteps",
        type=non_negative_int,
        metavar="N",
        help="the student's distillation steps (default: the config's distill_timesteps,"
        " else the preset's share of --timesteps: half)",
    )
    g.add_argument(
        "--parallel",
        type=positive_int,
        metavar="N",
        help="member processes at once on this machine (default: as many as the cores hold)",
    )
    g.add_argument(
        "--ray",
        metavar="ADDRESS",
        default=None,
        help="run the members as tasks on this Ray cluster (default: $RAY_ADDRESS when"
        " set); --out must be on storage every node sees. Needs inspector[ray]",
    )


def run_members(args: argparse.Namespace, cfg: object) -> int:
    """Train K members, their ensemble and the student; print the table."""
    from inspector.camera import parse_params
    from inspector.errors import InspectorError
    from inspector.train.members import train_members

    if args.teacher:
        raise InspectorError("--teacher does not combine with --members (the ensemble teaches)")
    address = args.ray or os.environ.get("RAY_ADDRESS") or None
    if args.members < 2:
        raise InspectorError(
            "--ray runs the members of an ensemble on a cluster: give --members K (K >= 2)"
        )
    res = train_members(
        args.profile,
        args.camera,
        parse_params(args.param),
        args.timesteps,
        args.out,
        cfg,  # type: ignore[arg-type]
        args.members,
        resume=args.resume,
        ray_address=address,
        parallel=args.parallel,
        distill_timesteps=args.distill_timesteps,
    )
    print((res.out / "report.md").read_text(), end="")
    print(f"student (one agent, export it): {res.student}")
    print(f"ensemble (export it as one graph): {res.ensemble}")
    return 0
