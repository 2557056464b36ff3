"""python -m fastmog: the command line of fastmog.app.cli."""
import sys

if __name__ == "__main__":
    try:
        from .app.cli import program
    except KeyboardInterrupt:            # Ctrl-C while Python is still loading fastmog
        print("fastmog: interrupted (Ctrl-C)", file=sys.stderr)
        sys.exit(130)
    program()
