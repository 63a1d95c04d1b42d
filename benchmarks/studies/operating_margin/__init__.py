"""How often the <= 5 % false-alarm point chosen on val keeps its promise on new parts
(issue #26: the quality goal's operating point), and what ``--confidence`` buys.

``calibrate --max-false-alarms 0.05`` picks the most sensitive ok bias whose false-alarm
rate on the val parts is at most 5 %. The magnetic tiles' val split has 90 good tiles, so
that point may allow 4 false alarms in 90 (4.4 %), and on the 202 good test tiles it gave
more than 5 % for 2 of the 7 students evaluated before this study. ``--confidence C``
holds the rate's one-sided Clopper-Pearson bound at confidence C to the ceiling instead
(:func:`inspector.policy.operating_point.choose_bias`).

For each model of finished ``train --members`` runs, one full-depth pass over the val and
test splits (read at each search depth the model was trained to, as ``calibrate
--search-depth auto`` does), then for each rule (the rate seen; confidence 0.8; 0.9):

* **the fixed split**: the depth and bias chosen on val, the figures on test: the
  product's figure, the only one that counts toward the goal;
* **re-splits**: a property of the rule, not of the model: the val and test tiles pooled
  and split again at random (the val split's class counts on one side, every other tile
  on the other; 200 splits, seed 0), the point chosen on the one side and judged on the
  other. It says how often each rule's promise fails on parts it did not see.

    python -m benchmarks.studies.operating_margin record RUN --label s32 --models student,ensemble
    python -m benchmarks.studies.operating_margin report
"""
