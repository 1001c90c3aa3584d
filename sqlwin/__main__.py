"""``python -m sqlwin``: the same as the ``sqlwin`` console script."""

import sys

from sqlwin.cli import main

if __name__ == "__main__":
    sys.exit(main())
