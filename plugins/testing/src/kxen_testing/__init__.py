"""kxen-testing: an in-memory transport, a scriptable fake MCP server, and pytest fixtures.

Select the in-memory transport like any other kind, naming a registered fake server::

    {"mcpServers": {"fake": {"transport": "memory", "options": {"server": "my-fake"}}}}

    register_fake("my-fake", FakeServer(tools={"echo": lambda args: text_result(args["text"])}))

For pytest, enable the fixtures with ``pytest_plugins = ["kxen_testing.pytest_plugin"]``.
"""

from .fake import FakeError, FakeServer, text_result
from .memory import MemoryTransport, clear_fakes, get_fake, register_fake

__all__ = [
    "FakeError",
    "FakeServer",
    "MemoryTransport",
    "clear_fakes",
    "get_fake",
    "register_fake",
    "text_result",
]
