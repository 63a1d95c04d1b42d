"""Learning efficiency on synthetic panels where points are invisible at overview resolution.

Arms (same env, network and PPO settings; only rewards / loss differ):

  a  sparse profile (+1 correct verdict) + plain SB3 PPO
  b  shaped process + outcome rewards (lcd_panel terms), no redistribution
  c  b + exponential redistribution (lambda 0.15, window 20)
  d  b + learned (RUDDER-style) redistribution
  e  full stack: c + hybrid loss (0.7 PPO / 0.2 CE on labels / 0.1 KL from the scripted teacher)
  f  control: b + shuffled redistribution
  g  control: a's sparse rewards through HybridPPO and the RRM buffer (the trainer of
     b-f, extra loss weights 0): separates what the rewards do from what the trainer does
     (only with ``--arms``, e.g. ``--arms abcdefgh``)
  h  control: b's outcome terms only (no process terms): do the process rewards or the
     profile's verdict values decide what (b) learns? (only with ``--arms``)

Metric: environment steps until evaluation accuracy (deterministic policy, fixed
evaluation parts, budget-capped) first reaches the target (90 %); median and spread
over seeds. Also final accuracy, per-class recall, mean steps per part and the share
of glimpses at native resolution (a policy that never focuses cannot find points).

With ``--calibrate N`` each evaluation is also scored at the ok bias chosen on N other
labelled parts, as ``inspector calibrate`` would store it: a model whose verdicts lean
to one class shows there whether it separates the classes at all.

Two tasks (``--task``, see :data:`TASKS`): ``quadrants`` (default) and ``grid16`` (the
first, on which no arm learned: the default glimpse CNN cannot tell a 1-px point from
the full-depth pixel grid, and a search of 16 native cells caps accuracy at ~0.93).

Each (arm, seed) result is saved under benchmarks/results/learning_efficiency/ so an
interrupted run resumes where it stopped.

    python -m benchmarks.studies.learning_efficiency --quick      # < 10 min on 2 cores
    python -m benchmarks.studies.learning_efficiency              # 5 seeds, full budget
"""
