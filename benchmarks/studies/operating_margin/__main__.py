"""``python -m benchmarks.studies.operating_margin``."""

from benchmarks.studies.operating_margin.cli import main

raise SystemExit(main())
