"""``python -m benchmarks.studies.default_train``."""

from benchmarks.studies.default_train.cli import main

raise SystemExit(main())
