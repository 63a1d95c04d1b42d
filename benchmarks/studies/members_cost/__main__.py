"""``python -m benchmarks.studies.members_cost``."""

from benchmarks.studies.members_cost.cli import main

raise SystemExit(main())
