"""Quality on real footage: the agent against exhaustive tiling and a full-frame CNN.

Train on the magnetic-tile ``train`` split, select on ``val``, report on ``test`` only
(all 263 frames; the test split is never trained or selected on). Three methods, each
given the same wall-clock budget in the same run (training plus the validation passes
that select its checkpoint; the actual seconds are reported):

* **agent**: ``train_run`` with reward_profiles/magnetic_tile.yaml over the ``folder``
  driver (split=train), TrainConfig defaults (hybrid loss 0.7/0.2/0.1, scripted
  teacher), trained in resumable chunks; after every chunk the model is evaluated on
  val and the best val balanced accuracy is kept. The learning rate is held constant
  (``lr_floor = learning_rate``): every resumed chunk would restart the cosine schedule's
  progress, so the schedule would anneal to its floor at the end of each chunk.
* **tiling**: the same CNN (GlimpseCNN + standardise, a linear head to the classes),
  trained supervised on native 32x32 tiles of the train frames. A tile is labelled with
  its image's class when it holds at least ``MIN_OVERLAP`` mask pixels, free when it
  holds none; tiles touching 1..MIN_OVERLAP-1 mask pixels are ambiguous and left out.
  Every tile of a test frame is classified; the frame's verdict is the class of its
  most confident defect tile when that tile's defect probability (1 - p(free)) exceeds
  a threshold chosen on val, else free. Pixels examined: every tile (edge tiles are
  shifted inside the frame, so they overlap their neighbours: slightly over 1.0).
* **fullframe**: the whole frame resized to 64x64 (INTER_AREA), the same CNN family,
  class-weighted cross-entropy. It examines no native-resolution pixel (pixel
  fraction 0; the 64x64 input is reported beside it).

Metrics come from :func:`inspector.train.evaluate.metrics` for all three. Each method
also gets the goal's operating point (:func:`operating_point`): its defect AUROC on val
and test, and the test figures at the ok bias (tiling: the threshold) that gives the
highest val recall with val false alarms at most 5 %, as ``inspector calibrate
--max-false-alarms 0.05 --confidence none`` would choose it; ``--rescore`` adds that to
saved results from their saved models. Results are
saved per method under benchmarks/results/quality_magnetic_tile/<mode>/ (quick/ is
git-ignored) so an interrupted run resumes; the agent's training run lives under
runs/quality_magnetic_tile/<mode>/ and resumes from its last chunk.

    python -m benchmarks.studies.quality_magnetic_tile --quick       # 2.5 min a method, < 10 min
    python -m benchmarks.studies.quality_magnetic_tile               # 20 min a method
"""
