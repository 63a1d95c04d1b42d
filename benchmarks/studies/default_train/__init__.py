"""The default ``train`` command and the demo: what they reach, recorded from their runs.

``inspector train`` with no config file trains with the preset chosen from the camera
(docs/training.md). This study records finished runs of the product's own commands (it
trains nothing itself): the figures of the run's ``report.json`` (the evaluation frames,
at the operating point chosen on val), which model was kept and on which frames, the
operating point, and the CPU time of the command (``--cpu-s``: user+system seconds as
``time`` printed them; this machine is shared, so wall time says little).

Run the command (one training process at a time on the shared machine), e.g. the demo::

    time python main.py demo --out demo

or the default command on the quadrants task::

    time python main.py train --profile reward_profiles/lcd_quadrants.yaml --camera synthetic \\
        --param size=128 --param grid=0.25 --param invisible_at=32 --param point_size=1,1 \\
        --out runs/quadrants_s0 --seed 0

then record it (saved with its configuration under benchmarks/results/default_train/)::

    python -m benchmarks.studies.default_train record demo/run --label demo_s0 \\
        --command "python main.py demo" --cpu-s 812 --demo demo/summary.json
    python -m benchmarks.studies.default_train report
"""
