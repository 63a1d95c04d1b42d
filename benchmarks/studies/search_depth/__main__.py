"""``python -m benchmarks.studies.search_depth``."""

from benchmarks.studies.search_depth.cli import main

raise SystemExit(main())
