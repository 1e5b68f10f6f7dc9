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

from .fake import FakeError, FakeServer, text_result
from .helpers import Answers, Channel, mem, running
from .memory import MemoryTransport, clear_fakes, get_fake, register_fake

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
    "running",
    "text_result",
]
