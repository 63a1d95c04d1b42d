"""Command-line entry point: ``python main.py --help``."""

import sys

from inspector.cli import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
