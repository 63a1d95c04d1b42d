"""``python -m benchmarks.studies.retrain``."""

from benchmarks.studies.retrain.cli import main

raise SystemExit(main())
