"""Retraining from collected footage: a synthetic-panel model retrained on magnetic-tile footage.

1. A base model is trained on synthetic LCD panels (classes ok, line, point), or
   ``--base RUN`` reuses one.
2. The magnetic-tile ``train`` split (splits.csv) is imported into a fresh footage
   store; the store holds out ~20 % of it by content hash for the gate.
3. ``retrain`` fine-tunes the base on the store's train part with the
   magnetic_tile profile (six classes). The class list changes, so the verdict
   head is re-initialised; the CNN, move and value heads start from the base.
4. Base and candidate are evaluated on the magnetic-tile ``test`` split (never
   imported). The base cannot name the tile classes, so the comparable figure is
   the two-class view (free against any defect); the candidate's six-class
   figures are reported too.

The figures are saved with their configuration under benchmarks/results/retrain/;
``--report-only`` writes the section from them.

Usage: ``python -m benchmarks.studies.retrain [--quick] [--base RUN] [--work DIR]
[--report-only] [--no-write]``
"""
