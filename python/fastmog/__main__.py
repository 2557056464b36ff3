"""python -m fastmog: the command line of fastmog.app.cli."""
import sys

from .app.cli import main

if __name__ == "__main__":
    sys.exit(main())
