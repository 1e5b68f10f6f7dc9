"""kxen-testing: an in-memory transport, a scriptable fake MCP server, and pytest fixtures.

Select the in-memory transport like any other kind, naming a registered fake server::

    {"mcpServers": {"fake": {"transport": "memory", "options": {"server": "my-fake"}}}}

    register_fake("my-fake", FakeServer(tools={"echo": lambda args: text_result(args["text"])}))

For tests that drive a real Runtime: :func:`mem` (a memory-transport server entry),
:func:`running` (start a Runtime, wait until its servers settled) and :class:`Channel` (a scriptable
approval channel), from :mod:`kxen_testing.helpers`.

For pytest, enable the fixtures (``anyio_backend``, ``kxen_home``, ``fakes``) with
``pytest_plugins = ["kxen_testing.pytest_plugin"]``. See plugins/testing/README.md.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .fake import FakeError, FakeServer, text_result
    from .helpers import Answers, Channel, mem, returned_by_receive, running
    from .memory import MemoryTransport, clear_fakes, get_fake, register_fake

# loaded on first use, so the ``memory`` entry point (kxen_testing.hooks) stays cheap to import
_LAZY = {
    "FakeError": "fake",
    "FakeServer": "fake",
    "text_result": "fake",
    "Answers": "helpers",
    "Channel": "helpers",
    "mem": "helpers",
    "returned_by_receive": "helpers",
    "running": "helpers",
    "MemoryTransport": "memory",
    "clear_fakes": "memory",
    "get_fake": "memory",
    "register_fake": "memory",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'kxen_testing' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


# every name of _LAZY (tests/test_public_names.py holds the two together)
__all__ = [
    "Answers",
    "Channel",
    "FakeError",
    "FakeServer",
    "MemoryTransport",
    "clear_fakes",
    "get_fake",
    "mem",
    "register_fake",
    "returned_by_receive",
    "running",
    "text_result",
]
