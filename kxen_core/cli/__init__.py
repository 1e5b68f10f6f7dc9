"""The ``kxen`` command: thin -- parse, call the public Runtime and config APIs, print text or ``--json``.

The top layer: it may use every other subpackage; nothing imports it. :func:`main` is the console
script's entry point (``kxen = "kxen_core.cli:main"``; also ``python -m kxen_core.cli``).
"""

from kxen_core.cli.command import main

__all__ = ["main"]
