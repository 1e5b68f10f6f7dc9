"""The two host hooks the conformance client installs: a headless authorize-URL taker and an
elicitation handler that accepts with the requested schema's defaults.

A host app would show the authorization URL to a person (a browser, a dialog); here nobody is
there, so the taker GETs it and follows the redirects, the way a browser would after an
automatic approval. The conformance authorization servers answer ``/authorize`` with a redirect
straight to the flow's 127.0.0.1 listener, which ends the walk. Every step is bounded: redirects,
time, and the body read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import httpx

from kxen_core import ElicitationRequest, ServerConfig, hookimpl
from kxen_core.asks import apply_schema_defaults

MAX_REDIRECTS = 10
FOLLOW_SECONDS = 20.0
#: where the flow's redirect listener lives; the walk must end there
LISTENER_HOST = "127.0.0.1"


def _where(url: httpx.URL | str) -> str:
    """A URL without its query: the redirect to the listener carries the authorization code."""
    parts = urlsplit(str(url))
    return f"{parts.scheme}://{parts.netloc}{parts.path}"


class Headless:
    """Register on the plugin manager given to the Runtime (``pm.register(Headless(log))``)."""

    def __init__(self, log: Callable[[str], None]) -> None:
        self.log = log
        self.followed = 0

    @hookimpl
    async def kxen_authorize_url(self, server: ServerConfig, url: str) -> bool | None:
        self.followed += 1
        self.log(f"sign-in {self.followed}: following the authorization URL {_where(url)}")
        async with httpx.AsyncClient(
            follow_redirects=True, max_redirects=MAX_REDIRECTS, timeout=FOLLOW_SECONDS, trust_env=False
        ) as client:
            response = await client.get(url)
        final = urlsplit(str(response.url))
        if final.hostname != LISTENER_HOST:
            # the server kept the walk (a login page, an error): no redirect will reach the flow
            raise RuntimeError(
                f"the authorization URL ended at {_where(response.url)} (HTTP {response.status_code}), "
                "not at the sign-in listener"
            )
        self.log(f"sign-in {self.followed}: the redirect reached the listener (HTTP {response.status_code})")
        return True

    @hookimpl
    def kxen_elicitation_request(self, server: ServerConfig, request: ElicitationRequest) -> dict[str, Any] | None:
        # nobody to ask: accept with what the form would be pre-filled with (SEP-1034 defaults)
        content = apply_schema_defaults(request.requested_schema, {})
        self.log(f"elicitation from {server.name}: accepted with defaults for {sorted(content)}")
        return {"action": "accept", "content": content}
