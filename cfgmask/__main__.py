"""``python -m cfgmask``: the command line (see :mod:`cfgmask.cli`)."""

import sys

from .cli import main

sys.exit(main())
