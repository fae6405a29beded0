"""python -m gridwarp ARGS: the gridwarp command line (docs/cli.md), run in this process.

The `gridwarp` command that `pip install` puts on PATH runs main() too.
"""
import sys

from . import _gridwarp


def main(argv=None):
    """Runs the command line `gridwarp ARGS` (argv: the arguments, sys.argv[1:] by default) and
    returns its exit status."""
    if not hasattr(_gridwarp, "_main"):
        sys.exit("gridwarp: this build of the Python package has no command line (built without the io library)")
    return _gridwarp._main(list(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    sys.exit(main())
