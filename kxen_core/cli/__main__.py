"""``python -m kxen_core.cli``: the ``kxen`` command."""

import sys

from kxen_core.cli.command import main

sys.exit(main())
