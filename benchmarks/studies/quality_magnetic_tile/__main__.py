"""``python -m benchmarks.studies.quality_magnetic_tile``."""

from benchmarks.studies.quality_magnetic_tile.cli import main

raise SystemExit(main())
