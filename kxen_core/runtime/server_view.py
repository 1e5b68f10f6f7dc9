"""What a server's status says: :meth:`ServerView.snapshot`, and how an auth failure settles it.

:class:`ServerView` is the part of :class:`kxen_core.runtime.server.Server` that reports; every text in a
snapshot that may quote a server or a plugin is escaped (:func:`kxen_core.safe_text.safe_text`),
and no header value, token or secret is ever in it.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any

from kxen_core.errors import AuthRequired, ServerNotReady
from kxen_core.protocol.era import era_fields
from kxen_core.runtime.failures import auth_failure, credential_plugin_failure
from kxen_core.runtime.remote_ack import ACKNOWLEDGE_STEP, NOT_ACKNOWLEDGED
from kxen_core.runtime.server_words import server_words
from kxen_core.runtime.states import Phase, State
from kxen_core.safe_text import safe_text

if TYPE_CHECKING:
    from kxen_core.config import ServerConfig
    from kxen_core.protocol.catalog import Catalog
    from kxen_core.protocol.notices import ServerLog
    from kxen_core.protocol.session import Session
    from kxen_core.runtime.tasks import TaskBook
    from kxen_core.transport import MessageStream

#: the next step of a server whose credential plugin broke
FIX_CREDENTIAL_PLUGIN = "fix or remove the credential plugin named in the reason (kxen plugins lists it), then restart"


class ServerView:
    """Mixed into ``Server``: the attributes below are the server's own (attrs fields there)."""

    if TYPE_CHECKING:
        env: Any
        config: ServerConfig
        state: State
        phase: Phase | None
        error: str | None
        note: str | None
        fingerprint: str | None
        auth: AuthRequired | None
        stream: MessageStream | None
        session: Session | None
        catalogs: dict[str, Catalog]
        held_tools: dict[str, Any]
        diagnostics: deque[str]
        server_log: ServerLog
        tasks: TaskBook

        @property
        def name(self) -> str: ...

        def set(self, state: State, phase: Phase | None = None, error: str | None = None) -> None: ...

        def pin_view(self) -> dict[str, Any]: ...
        def context_view(self) -> dict[str, Any]: ...

    def count(self, kind: str) -> int:
        cat = self.catalogs.get(kind)
        return len(cat.items) if cat else 0

    def snapshot(self) -> dict[str, Any]:
        """The server's status; a reason, a diagnostic, a log line that quotes the server has what
        kxen holds as secret scrubbed (``Runtime.secrets``)."""
        view = self._view()
        secrets = self.env.secrets if self.env is not None else None
        return secrets.data(view) if secrets else view

    def _view(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "scope": self.config.scope,
            "transport": self.config.kind,
            "state": self.state.value,
            "phase": self.phase.value if self.phase else None,
            # may quote a server (its stderr tail spans lines): escaped, newlines kept for the CLI to indent
            "error": safe_text(self.error, multiline=True) if self.error else None,
            "tools": self.count("tools"),
            "resources": self.count("resources"),
            "prompts": self.count("prompts"),
            **self.pin_view(),  # pinning, held, unaccepted (server_pins)
            **self.context_view(),  # toolsHidden, toolChars, toolTokens: what the model is shown (server_filters)
            "note": safe_text(self.note) if self.note else None,
            "fingerprint": self.fingerprint,
            **era_fields(self.session),  # era, protocolVersion: what the session speaks
            **server_words(self.session),  # serverInfo, instructions: what the server says of itself
            "auth": self._auth(),
            "next": self.next_step(),
            "scopes": list(self.auth.scopes) if self.auth is not None and self.state == State.NEEDS_LOGIN else [],
            "transportInfo": self._describe(),
            "diagnostics": [safe_text(d) for d in list(self.diagnostics)[-20:]],
            "log": self.server_log.snapshot(),  # the server's own notifications/message, escaped
            "tasks": self.tasks.status_view(),  # running tasks, each known task's status line (runtime.tasks)
        }

    def next_step(self) -> str | None:
        """What a person does about an auth failure (``kxen mcp login NAME``...), an unset
        ``${VAR}`` (set it) or a remote server not confirmed (``kxen remote on``), else None."""
        if self.state == State.NEEDS_LOGIN and self.auth is not None:
            return safe_text(self.auth.next_step) if self.auth.next_step else None
        if self.state == State.FAILED and self.phase == Phase.AUTH:
            return FIX_CREDENTIAL_PLUGIN
        if self.state == State.DISABLED and self.error == NOT_ACKNOWLEDGED:
            return ACKNOWLEDGE_STEP
        if self.state == State.FAILED and self.phase == Phase.CONFIG and self.config.unset:
            names = " ".join(dict.fromkeys(u.variable for u in self.config.unset))
            return f"set {names} in the environment kxen runs in, then start again (kxen mcp status)"
        held = self.held_tools
        if self.state == State.READY and held:
            from kxen_core.runtime.server_pins import next_step

            first = held[min(held)]
            more = f" (or every held tool: kxen mcp pins accept {self.name})" if len(held) > 1 else ""
            return safe_text(next_step(self.name, first) + more)
        return None

    def not_ready(self) -> ServerNotReady:
        """The error of a call to this server while it is not ready; it names the next step of a
        server that needs a sign-in (``... ; next: kxen mcp login NAME``)."""
        step = self.next_step()
        reason = f"{self.error}; next: {step}" if self.error and step else self.error
        return ServerNotReady(self.name, self.state.value, self.phase.value if self.phase else None, reason)

    def settle_auth(self, failure: BaseException | str | None) -> bool:
        """Settle in ``needs_login`` (an ``AuthRequired`` ended the connection) or ``failed`` in
        phase ``auth`` (a credential plugin broke); False when ``failure`` is neither."""
        auth = auth_failure(failure)
        if auth is not None:
            self.auth = auth
            self.set(State.NEEDS_LOGIN, Phase.AUTH, auth.reason)
            return True
        broken = credential_plugin_failure(failure)
        if broken is not None:
            self.auth = None
            self.set(State.FAILED, Phase.AUTH, str(broken))
            return True
        return False

    def _auth(self) -> str | None:
        """How a remote server is authenticated, without any value: the header names the config
        sets, an ``oauth`` block, the plugins that answer ``kxen_credential_lookup``."""
        if not self.config.is_remote:
            return None
        parts = []
        names = sorted(self.config.headers)
        if names:
            parts.append(f"headers: {', '.join(safe_text(n) for n in names)}")
        if self.config.oauth is not None:
            parts.append("oauth")
        pm = self.env.pm if self.env is not None else None
        caller = getattr(pm.hook, "kxen_credential_lookup", None) if pm is not None else None
        plugins = sorted({i.plugin_name for i in caller.get_hookimpls()}) if caller is not None else []
        if plugins:
            parts.append(f"credentials from: {', '.join(safe_text(p) for p in plugins)}")
        return "; ".join(parts) if parts else "none"

    def _describe(self) -> dict[str, Any] | None:
        if self.stream is None:
            return None
        try:
            info = self.stream.describe()
        except Exception as exc:  # describe() is best effort
            return {"error": f"{type(exc).__name__}"}
        return info if isinstance(info, dict) else None


__all__ = ["FIX_CREDENTIAL_PLUGIN", "ServerView"]
