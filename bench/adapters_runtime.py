"""kxen through the host's public path: a ``Runtime`` entered with a config, ``wait_ready``,
``Runtime.call_tool``, ``Runtime.read_resource``, ``Runtime.refresh`` and ``Runtime.tools``.

What a host app does, and nothing else: the config is a user ``mcp.json`` (and, for HTTP, a
``config.toml`` turning remote MCP and loopback ``http://`` on, with each remote server confirmed
as ``kxen remote on --yes`` records it) in a temporary home of its own per start, written outside
the clock and removed off it; the workspace is one empty temporary directory for the whole run, as
a host restarts in the same project (each server is then the one whose tool definitions the pin
store recorded at its first start: ``FRESH_WORKSPACE`` makes every start a first sight, a new
identity to record); every runtime of the process shares one
plugin manager (every installed plugin, the default policy and safety plugins included), as a host
app would. The call goes through the policy votes: the entry allows ``echo`` with ``toolPolicies``.

W9's two kxen sides: ``KxenRuntimeHttpClient`` with the peer's token as a static ``headers``
entry (the ``kxen_bearer`` side), and ``KxenRuntimeOAuthClient``: an ``oauth`` entry and no header,
the token put in the OAuth plugin's store beforehand, so the plugin's ``kxen_credential_lookup``
is what sends it (no sign-in, nothing but 127.0.0.1).
"""

from __future__ import annotations

import asyncio
import atexit
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from adapters import BenchError, HttpPeer, ServerSpec, cold_start, plugin_manager


def _render(result: dict[str, Any], *, server: str, tool: str) -> Any:
    """``kxen_core.agent.output.render_tool_result``, imported once (a host imports it at its top;
    this module imports kxen only when a kxen side runs)."""
    global _render
    from kxen_core.agent.output import render_tool_result

    _render = render_tool_result
    return render_tool_result(result, server=server, tool=tool)


#: what the bench's config allows; every other tool is the server's default (ask: no channel, so no)
ALLOWED = {"echo": "allow"}


def _stdio_entry(spec: ServerSpec) -> dict[str, Any]:
    return {"command": sys.executable, "args": spec.args(), "toolPolicies": ALLOWED}


#: a new workspace per start, so each server a first sight for the pin store (bench/prof_start.py
#: --fresh-workspace); by default one workspace for the run
FRESH_WORKSPACE = False
_shared_workspace: Path | None = None
_to_remove: list[Path] = []  # homes closed on the clock: removed at the next one's creation


def _remove_later(*paths: Path) -> None:
    _to_remove.extend(paths)


@atexit.register
def _remove_now() -> None:
    _remove_now_homes()
    if _shared_workspace is not None and not os.environ.get("KXEN_BENCH_WORKSPACE"):
        shutil.rmtree(_shared_workspace, ignore_errors=True)


class RuntimeHome:
    """A temporary home holding the config files, and the run's empty temporary workspace."""

    def __init__(self) -> None:
        global _shared_workspace
        _remove_now_homes()
        self.home = Path(tempfile.mkdtemp(prefix="kxen-bench-home-"))
        if FRESH_WORKSPACE:
            self.workspace = Path(tempfile.mkdtemp(prefix="kxen-bench-ws-"))
            self._own_workspace = True
        else:
            if _shared_workspace is None:
                given = os.environ.get("KXEN_BENCH_WORKSPACE")  # bench/fresh.py: the run's, not its own
                _shared_workspace = Path(given) if given else Path(tempfile.mkdtemp(prefix="kxen-bench-ws-"))
            self.workspace, self._own_workspace = _shared_workspace, False

    def write(self, servers: dict[str, dict[str, Any]], *, remote: bool = False) -> None:
        (self.home / "mcp.json").write_text(json.dumps({"mcpServers": servers}))
        if remote:
            from kxen_core.config import ServerConfig
            from kxen_core.config.trust import acknowledge_remote
            from kxen_core.runtime.remote_ack import acknowledgement_key

            (self.home / "config.toml").write_text("[mcp]\nallow_loopback_http = true\n")
            keys = [acknowledgement_key(ServerConfig(url=e["url"])) for e in servers.values() if "url" in e]
            acknowledge_remote(self.home, keys, enable=True)

    def remove(self) -> None:
        """Removed off the clock: at the next home's creation, or at exit."""
        _remove_later(self.home, *([self.workspace] if self._own_workspace else []))


def _remove_now_homes() -> None:
    while _to_remove:
        shutil.rmtree(_to_remove.pop(), ignore_errors=True)


class _RuntimeBase:
    """Enter a Runtime over ``self.dirs`` and wait for every server to be ready."""

    name = "kxen"
    lists_on_start = True  # entering and wait_ready include the first tools/list
    dirs: RuntimeHome
    runtime: Any = None

    async def _enter(self) -> None:
        from kxen_core.runtime.workspace import Runtime

        rt = Runtime(home=self.dirs.home, workspace=self.dirs.workspace, pm=plugin_manager())
        await rt.__aenter__()
        self.runtime = rt
        try:
            if not await rt.wait_ready(60):
                raise BenchError("kxen: the runtime did not settle in 60 s")
            bad = [s for s in rt.status() if s["state"] != "ready"]
            if bad:
                raise BenchError(f"kxen: not ready: {bad[:2]}")
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        rt, self.runtime = self.runtime, None
        try:
            if rt is not None:
                await rt.__aexit__(None, None, None)
        finally:
            self.dirs.remove()


class KxenRuntimeClient(_RuntimeBase):
    """One server in one Runtime. ``start()`` (timed in W1) is entering the runtime (config load,
    admission, the server's task, spawn, initialize, the first tools/list) and ``wait_ready``."""

    def __init__(self, spec: ServerSpec, *, pipelined: bool = False) -> None:
        self.spec = spec
        self.dirs = RuntimeHome()
        self.dirs.write({spec.name: _stdio_entry(spec)})
        self.prefix = f"{spec.name}__"

    async def start(self) -> None:
        await self._enter()

    async def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result = await self.runtime.call_tool(self.prefix + tool, arguments)
        # what a host hands the agent: the bounded view (kxen_core.agent.output), timed with the call
        view = _render(result, server=self.spec.name, tool=tool)
        if view.truncated or view.text != result["content"][0]["text"]:
            raise BenchError(f"kxen: the agent's view differs from the result: {view.text[:200]!r}")
        return result

    async def read(self, uri: str) -> Any:
        """``Runtime.read_resource``: the agent's view of the read (an ``AgentOutput``, bounded)."""
        return await self.runtime.read_resource(self.spec.name, uri)

    async def list_tools(self) -> list[dict[str, Any]]:
        """The public refresh, then the public listing of what the agent now sees."""
        catalog = await self.runtime.refresh(self.spec.name, "tools")
        if not catalog.complete:
            raise BenchError(f"kxen: catalog incomplete: {catalog.diagnostics[:3]}")
        return self.runtime.tools(self.spec.name)


class KxenRuntimeHttpClient(KxenRuntimeClient):
    """One Streamable HTTP server (``http_server.py`` on 127.0.0.1) in one Runtime; remote MCP and
    loopback ``http://`` turned on in the user's settings. A peer that requires a token (W9) gets
    it as a static ``Authorization`` header in the entry (``headers``)."""

    def __init__(self, spec: ServerSpec, *, pipelined: bool = False) -> None:
        self.spec = spec
        self.dirs = RuntimeHome()
        self.prefix = f"{spec.name}__"
        self._peer: HttpPeer | None = None

    def entry(self, url: str) -> dict[str, Any]:
        entry: dict[str, Any] = {"url": url, "toolPolicies": ALLOWED}
        if self.spec.bearer:
            entry["headers"] = self.spec.auth_headers()
        return entry

    async def start(self) -> None:
        self._peer = await HttpPeer.start(self.spec)
        self.dirs.write({self.spec.name: self.entry(self._peer.url)}, remote=True)
        await self.before_enter()
        await self._enter()

    async def before_enter(self) -> None:
        """What a variant does with the config written, before the Runtime is entered."""

    async def close(self) -> None:
        peer, self._peer = self._peer, None
        try:
            await super().close()
        finally:
            if peer is not None:
                await peer.close()


#: the OAuth scope W9's stored token was granted, the one the entry's ``oauth`` block asks for
OAUTH_SCOPE = "bench:call"


class KxenRuntimeOAuthClient(KxenRuntimeHttpClient):
    """W9's OAuth side: the entry has an ``oauth`` block (scope :data:`OAUTH_SCOPE`) and no header;
    before the Runtime is entered, the peer's token is stored with the plugin's store API
    (``TokenStore.put_token``), valid for an hour, under the key the plugin's engine computes for
    this entry as the loader reads it (config scope, name, canonical URL, this home), in the data
    directory in force (the workload's fresh ``KXEN_DATA_DIR``). Its close signs out (the entry's
    tokens dropped). ``stored_token()`` is what the store holds for the entry then."""

    name = "kxen"
    _token_key: Any = None  # the store's key of the entry's token, from before_enter on

    def entry(self, url: str) -> dict[str, Any]:
        return {"url": url, "toolPolicies": ALLOWED, "oauth": {"scopes": [OAUTH_SCOPE]}}

    async def before_enter(self) -> None:
        import time

        from kxen_oauth.hooks import engine
        from kxen_oauth.store import TokenRecord, TokenStore

        from kxen_core.config import load_config

        config = load_config(self.dirs.home, self.dirs.workspace, pm=plugin_manager())
        entry = config.servers[self.spec.name]
        if entry.headers or entry.oauth is None:
            raise BenchError("kxen oauth: the entry must have an oauth block and no static header")
        key = self._token_key = engine().key_of(entry, self.dirs.home)
        if key is None:
            raise BenchError(f"kxen oauth: the plugin binds no token to {entry.url!r}")
        scope, server, resource, home = key
        record = TokenRecord(
            config_scope=scope,
            server=server,
            resource=resource,
            home=home,
            issuer="http://127.0.0.1/bench-issuer",
            client_id="kxen-bench",
            access_token=self.spec.bearer,
            expires_at=time.time() + 3600,
            scope=OAUTH_SCOPE,
        )
        await TokenStore().put_token(record)

    def stored_token(self) -> str | None:
        from kxen_oauth.store import TokenStore

        record = TokenStore().token(self._token_key)
        return record.access_token if record is not None else None

    async def close(self) -> None:
        key, self._token_key = self._token_key, None
        try:
            await super().close()
        finally:
            if key is not None:
                from kxen_oauth.store import TokenStore

                await TokenStore().drop_tokens(key[0], key[1], key[3])


class KxenRuntimeFleet(_RuntimeBase):
    """W5, first shape: one Runtime with every server in its config, started at once."""

    def __init__(self, specs: list[ServerSpec]) -> None:
        self.specs = specs
        self.dirs = RuntimeHome()
        self.dirs.write({s.name: _stdio_entry(s) for s in specs})

    async def start(self) -> None:
        await self._enter()

    async def call(self, i: int, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return await self.runtime.call_tool(f"{self.specs[i].name}__{tool}", arguments)


class ClientFleet:
    """W5 for one-server clients: each in its own task (an async context is left in the task that
    entered it), all started at once; ``start()`` returns when every one has initialized."""

    def __init__(self, clients: list[Any]) -> None:
        self.clients = clients
        self._ready: list[asyncio.Event] = []
        self._release = asyncio.Event()
        self._tasks: list[asyncio.Task] = []

    async def start(self) -> None:
        async def run(client: Any, ready: asyncio.Event) -> None:
            try:
                await cold_start(client)
                ready.set()
                await self._release.wait()
            finally:
                await client.close()

        self._ready = [asyncio.Event() for _ in self.clients]
        self._tasks = [asyncio.ensure_future(run(c, r)) for c, r in zip(self.clients, self._ready, strict=True)]
        waiter = asyncio.ensure_future(asyncio.gather(*(r.wait() for r in self._ready)))
        done, _ = await asyncio.wait([waiter, *self._tasks], return_when=asyncio.FIRST_COMPLETED)
        if waiter not in done:  # a start failed: surface its error
            waiter.cancel()
            await self.close()
            raise BenchError("W5: a server task ended before all were ready")

    async def call(self, i: int, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return await self.clients[i].call(tool, arguments)

    async def close(self) -> None:
        self._release.set()
        results = await asyncio.gather(*self._tasks, return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            raise errors[0]
