"""Header values (tokens, API keys) sent to remote servers never leak: not into errors, status or
the log, whatever the server echoes back, over Streamable HTTP and legacy SSE. The servers are
written here, in the test's own event loop, on 127.0.0.1, and echo the request headers."""

from __future__ import annotations

import json
import logging
import traceback

import anyio
import pytest
from kxen_testing import running
from remote_support import (
    REMOTE_PLUGINS,
    WAIT,
    Request,
    Response,
    legacy_sse_responder,
    local_http,
    remote,
    remote_on,
    status_of,
    streamable_responder,
)

from kxen_core.errors import AuthRequired, ConfigError, HTTPStatusError, KxenError, RemoteError, ServerNotReady

pytestmark = pytest.mark.anyio


# --- header values never leak -----------------------------------------------------------------------------


SECRETS = {"Authorization": "Bearer tok-AAAA1111-very-secret", "X-Api-Key": "key-BBBB2222-very-secret"}


def texts_of_error(exc: BaseException) -> str:
    parts = ["".join(traceback.format_exception(exc)), repr(exc), repr(exc.args)]
    for attr in ("body", "data", "message", "reason", "error"):
        if hasattr(exc, attr):
            parts.append(repr(getattr(exc, attr)))
    return "\n".join(parts)


def assert_no_secret(where: str, text: str) -> None:
    for value in SECRETS.values():
        assert value not in text, f"a header value leaked into {where}: {text[:2000]}"


LEAK_CASES = [
    pytest.param("http", "initialize", 401, False, id="http-initialize-401-text"),
    pytest.param("http", "initialize", 500, True, id="http-initialize-500-jsonrpc"),
    pytest.param("http", "tools/call", 500, False, id="http-call-500-text"),
    pytest.param("http", "tools/call", 401, True, id="http-call-401-jsonrpc"),
    pytest.param("sse", "connect", 401, False, id="sse-connect-401-text"),
    pytest.param("sse", "initialize", 500, True, id="sse-initialize-500-jsonrpc"),
    pytest.param("sse", "tools/call", 500, False, id="sse-call-500-text"),
    pytest.param("sse", "tools/call", 401, True, id="sse-call-401-jsonrpc"),
]


@pytest.mark.parametrize(("kind", "fail_on", "status", "as_jsonrpc"), LEAK_CASES)
async def test_header_values_never_leak(kxen_home, ws, caplog, kind, fail_on, status, as_jsonrpc):
    caplog.set_level(logging.DEBUG)
    responder = (streamable_responder if kind == "http" else legacy_sse_responder)(fail_on, status, as_jsonrpc)
    async with local_http(responder) as server:
        path = "/mcp" if kind == "http" else "/sse"
        kxen_home.write_settings(remote_on(f"{server.base}{path}"))
        kxen_home.write_servers({"r": remote(f"{server.base}{path}", kind, headers=SECRETS)})
        async with running(kxen_home, ws, allow=REMOTE_PLUGINS) as rt:
            # the server did get the headers, and echoed them back
            assert any(r.headers.get("x-api-key") == SECRETS["X-Api-Key"] for r in server.requests)
            s = status_of(rt, "r")
            if fail_on == "tools/call":
                assert s["state"] == "ready"
                with anyio.fail_after(WAIT), pytest.raises(KxenError) as info:
                    await rt.call_tool("r__ping_tool", {})
                if status == 401:  # an auth failure whatever the body says: the server then needs a login
                    assert isinstance(info.value, AuthRequired) and info.value.status == 401
                else:
                    assert isinstance(info.value, RemoteError if as_jsonrpc else HTTPStatusError)
                if isinstance(info.value, AuthRequired):
                    pass
                elif isinstance(info.value, HTTPStatusError):
                    assert info.value.status == status
                else:
                    assert info.value.code == -32001
            else:
                if status == 401:
                    assert (s["state"], s["phase"]) == ("needs_login", "auth"), s
                else:
                    assert s["state"] == "failed" and s["phase"] in ("transport", "initialize")
                assert s["error"]
                with pytest.raises(ServerNotReady) as info:
                    await rt.call_tool("r__ping_tool", {})
            assert_no_secret("the error", texts_of_error(info.value))
            assert_no_secret("status()", json.dumps(rt.status()))
            assert_no_secret("status() of every server", repr(rt.status()))
    assert_no_secret("the log", caplog.text)


# --- regressions: each test's docstring says what was once wrong ------------------------------


async def test_a_bearer_token_echoed_without_its_scheme_never_leaks(kxen_home, ws):
    """Regression: the http transport's Redactor.remember (now kxen_transport_http.plumbing): only whole
    header values are scrubbed, so the credential of 'Bearer <token>' echoed without its scheme stays in
    errors"""
    token = "tok-CCCC3333-very-secret"

    async def respond(request: Request) -> Response:
        if request.method == "GET":
            return Response(405)
        got = request.headers.get("authorization", "").partition(" ")[2]
        return Response(401, f"invalid token {got}".encode())

    async with local_http(respond) as server:
        kxen_home.write_settings(remote_on(f"{server.base}/mcp"))
        kxen_home.write_servers({"r": remote(f"{server.base}/mcp", headers={"Authorization": f"Bearer {token}"})})
        async with running(kxen_home, ws, allow=REMOTE_PLUGINS) as rt:
            assert status_of(rt, "r")["state"] == "needs_login"
            assert token not in json.dumps(rt.status())


async def test_a_header_value_with_a_newline_never_leaks(kxen_home, ws):
    """Regression: kxen_core/config/models.py check_server_shape accepts header values with control
    characters; h11 then fails with 'Illegal header value b"...\n"' whose escaped repr the transport's
    Redactor does not match.

    A pasted token with a trailing newline: refused at load time, or at least never shown."""
    secret = "Bearer tok-DDDD4444-very-secret\n"
    async with local_http(streamable_responder("never", 500, False)) as server:
        kxen_home.write_settings(remote_on(f"{server.base}/mcp"))
        kxen_home.write_servers({"r": remote(f"{server.base}/mcp", headers={"Authorization": secret})})
        try:
            async with running(kxen_home, ws, allow=REMOTE_PLUGINS) as rt:
                shown = json.dumps(rt.status())
        except ConfigError as exc:
            shown = str(exc)
            assert "mcpServers.r.headers.Authorization" in shown
    assert "tok-DDDD4444-very-secret" not in shown
