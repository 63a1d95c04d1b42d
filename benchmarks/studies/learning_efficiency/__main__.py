"""``python -m benchmarks.studies.learning_efficiency``."""

from benchmarks.studies.learning_efficiency.cli import main

raise SystemExit(main())
