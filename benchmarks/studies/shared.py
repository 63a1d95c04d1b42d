"""What more than one study uses."""

from __future__ import annotations

#: Weight of the scripted teacher's stop steps in the class-balanced verdict
#: cross-entropy (``TrainConfig.verdict_stop_weight``; the stop steps are ~7 % of the
#: cloned samples): ``--balanced-verdict`` of learning_efficiency and
#: ``--agent-balanced-verdict`` of quality_magnetic_tile.
BALANCED_STOP_WEIGHT = 8.0
