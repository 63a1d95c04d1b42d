"""``python -m benchmarks.studies.distill_student``."""

from benchmarks.studies.distill_student.cli import main

raise SystemExit(main())
