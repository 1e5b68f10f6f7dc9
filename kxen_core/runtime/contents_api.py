"""The Runtime's resource and prompt API and the agent's view of its calls (mixed into
:class:`kxen_core.Runtime`).

Each method loads what it uses (:mod:`.contents`, :mod:`.kxen_tools`, :mod:`.agent_output`) on
its first call, so importing the runtime does not load them (see docs/performance.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kxen_core.agent.output import AgentOutput
    from kxen_core.config import Config
    from kxen_core.plugins.manager import KxenPluginManager
    from kxen_core.policy.approvals import Approvals
    from kxen_core.runtime.contents import ResourceContent
    from kxen_core.runtime.server import Server
    from kxen_core.safe_text import Secrets


class ContentsHost:
    """Mixed into :class:`kxen_core.Runtime`. The attributes below are the runtime's."""

    if TYPE_CHECKING:
        config: Config | None
        servers: dict[str, Server]
        role: str | None
        pm: KxenPluginManager
        approvals: Approvals

        @property
        def secrets(self) -> Secrets: ...

        def _server(self, name: str) -> Server: ...

        async def call_tool(
            self,
            name: str,
            arguments: Mapping[str, Any] | None = None,
            *,
            server: str | None = None,
            timeout: float | None = None,
        ) -> dict[str, Any]: ...

    @property
    def output_limit(self) -> int:
        """The most characters of one output the agent gets (``[mcp] max_output_chars``)."""
        if self.config:
            return self.config.settings.mcp.max_output_chars
        from kxen_core.agent.output import DEFAULT_OUTPUT_CHARS

        return DEFAULT_OUTPUT_CHARS

    def _entries(self, kind: str, server: str | None) -> list[dict[str, Any]]:
        from kxen_core.runtime import contents

        if server is not None:
            self._server(server)  # UnknownTool for a name no server has
        return contents.entries(self.servers.values(), kind, server)

    def resources(
        self, server: str | None = None, cursor: str | None = None, limit: int | None = None
    ) -> dict[str, Any]:
        """``{"resources": [{"server", "uri", ...as sent}], "nextCursor": C or None}`` of the ready
        servers (or one); from ``cursor`` on, at most ``limit`` (None: all). ``InvalidArguments``
        for a cursor kxen did not hand out."""
        from kxen_core.runtime import contents

        if server is not None:
            self._server(server)
        return contents.page("resources", contents.pairs(self.servers.values(), "resources", server), cursor, limit)

    def resource_templates(self, server: str | None = None) -> list[dict[str, Any]]:
        """Every resource template of the ready servers (or one), each with its ``server``."""
        return self._entries("resourceTemplates", server)

    def prompts(self, server: str | None = None) -> list[dict[str, Any]]:
        """Every prompt of the ready servers (or one), with its ``arguments`` and their ``required``."""
        return self._entries("prompts", server)

    async def read_resource(self, server: str, uri: str) -> AgentOutput:
        """Read a resource (after the policy votes) and return it as the agent gets it: bounded,
        binary contents as descriptors (the bytes: ``binary_data`` or :meth:`fetch_resource`),
        secrets scrubbed (:attr:`secrets`)."""
        from kxen_core.agent.output import render_read, scrubbed
        from kxen_core.runtime import contents

        raw = await contents.read(self, server, uri)
        return scrubbed(render_read(raw, server=server, uri=uri, limit=self.output_limit), self.secrets)

    async def fetch_resource(self, server: str, uri: str) -> list[ResourceContent]:
        """Read a resource for the host: each content's text, or its bytes decoded from base64."""
        from kxen_core.runtime import contents

        return contents.decode_contents(await contents.read(self, server, uri), server, uri)

    async def get_prompt(self, server: str, name: str, arguments: Mapping[str, Any] | None = None) -> AgentOutput:
        """Get a prompt, checked first (it exists, required arguments present, none unknown, all
        strings: ``InvalidArguments`` and nothing sent otherwise), as the agent gets it (JSON,
        secrets scrubbed)."""
        from kxen_core.agent.output import render_prompt, scrubbed
        from kxen_core.runtime import contents

        raw = await contents.get_prompt(self, server, name, arguments)
        return scrubbed(render_prompt(raw, server=server, name=name, limit=self.output_limit), self.secrets)

    async def agent_call(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        server: str | None = None,
        timeout: float | None = None,
    ) -> AgentOutput:
        """Call any tool of :meth:`tools` and return exactly what the agent gets: the result (or the
        error) as text within the output bound, binary as descriptors, every value kxen holds as
        secret (:attr:`secrets`) scrubbed as ``***``. Raises no kxen error."""
        from kxen_core.runtime import kxen_tools

        return await kxen_tools.agent_call(self, name, arguments, server=server, timeout=timeout)


__all__ = ["ContentsHost"]
