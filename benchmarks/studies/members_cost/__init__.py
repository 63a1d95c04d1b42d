"""Cost to a deployable model: the rows of ``train --members K`` runs side by side.

For each recorded run: every member, the verdict ensemble and the distilled student,
with the figures of their own ``report.json`` (the evaluation ``train`` ran on the
config's ``eval_camera_params``, the magnetic tiles' test split here) and the CPU
minutes it took to have that model (``cost.json``: user+system CPU of every attempt; the
ensemble: all members; the student: all members and its distillation).

Train a run with the product's command (one process at a time with ``--parallel 1``), e.g.::

    python main.py train --profile reward_profiles/magnetic_tile.yaml --camera folder \\
        --param path=../shared/datasets/magnetic-tile --param manifest=splits.csv \\
        --param split=train --config CONFIG --timesteps 16384 --members 2 \\
        --distill-timesteps 8192 --seed 0 --parallel 1 --out runs/tiles_m2

then record it (saved with its configuration under benchmarks/results/members_cost/; the
``members_cost`` section of docs/benchmarks.md is written from all saved results)::

    python -m benchmarks.studies.members_cost record runs/tiles_m2 --label tiles_m2_16k_s0
    python -m benchmarks.studies.members_cost report
"""
