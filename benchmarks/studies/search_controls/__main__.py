"""``python -m benchmarks.studies.search_controls``: see :mod:`.cli`."""

import sys

from benchmarks.studies.search_controls.cli import main

sys.exit(main())
