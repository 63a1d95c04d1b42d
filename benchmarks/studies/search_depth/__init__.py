"""The calibrated search depth on the magnetic tiles (issues #26 and #27, section 4b).

#27's section 4b found that on this footage the verdict heads lose evidence with every
native glimpse. ``calibrate`` and ``train`` therefore choose a search depth with the
operating point (``--search-depth auto``: each zoom level from the deepest up; a
shallower one only where it meets the objective strictly better on val). This study
measures that rule on a ``train --members`` run's student and ensemble: one full-depth
pass over the val and test splits, read at every depth (exact:
:func:`inspector.policy.agent.capped_at`), every choice (depth, ok bias) made on val,
every figure on test.

    python -m benchmarks.studies.search_depth record RUN --label s0
    python -m benchmarks.studies.search_depth report
"""
