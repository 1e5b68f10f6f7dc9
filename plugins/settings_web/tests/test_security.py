"""The Settings page's lock over real HTTP: ``kxen_settings_web.serve`` on 127.0.0.1, spoken to
with httpx and, where httpx would tidy a request up (a foreign or missing Host, a repeated header,
a lying Content-Length, a body that never ends), with raw bytes on a socket.

Every refused request is aimed at a real change (remote MCP on, a reload with a changed file, a
server's restart, a waiting launch approval): the config files and the runtime must be exactly as
before (:func:`page_http.state`). Server text carrying HTML, script and terminal escapes is shown
as text; no configured secret and no OAuth token ever reaches a page, an event, an answer or a log.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
import kxen_settings_web.guard
import pytest
from kxen_settings_web.guard import MAX_BODY
from page_http import (
    DEMO,
    REMOTE_OFF,
    REMOTE_ON,
    WAIT,
    Page,
    Response,
    acknowledge,
    auth_peer,
    demo_entry,
    local_http,
    pid_of,
    raw,
    remote,
    request,
    served,
    settings_command,
    state,
    states,
    stored,
    visit,
    write_project,
)

from kxen_core import Runtime
from kxen_core.config.trust import trust
from kxen_core.plugins import make_plugin_manager

pytestmark = pytest.mark.anyio


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    path = tmp_path / "workspace"
    path.mkdir()
    return path.resolve()


def locked_headers(where: str, headers: Any) -> None:
    """The headers every answer of the page carries."""
    csp = headers.get("content-security-policy")
    assert csp, f"{where}: no Content-Security-Policy"
    directives = {d.split()[0]: d.split()[1:] for d in csp.split(";") if d.strip()}
    assert directives["default-src"] == ["'none'"], (where, csp)
    assert directives["script-src"] == ["'self'"], (where, csp)  # no inline script, no eval
    assert "'unsafe-inline'" not in directives["script-src"] and "'unsafe-eval'" not in csp, (where, csp)
    assert directives["frame-ancestors"] == ["'none'"] and directives["base-uri"] == ["'none'"], (where, csp)
    expected = {
        "x-content-type-options": "nosniff",
        "referrer-policy": "no-referrer",
        "x-frame-options": "DENY",
        "cache-control": "no-store",
    }
    assert {k: headers.get(k) for k in expected} == expected, where


# --- the way in ---------------------------------------------------------------------------------


async def test_the_printed_url_is_exchanged_for_a_strict_cookie_and_nothing_opens_without_it(kxen_home, ws):
    kxen_home.write_servers({"demo": demo_entry()})
    rt = Runtime(home=kxen_home.path, workspace=ws, pm=make_plugin_manager(allow=["stdio"]))
    async with served(rt, enter=False) as page:
        client = page.client
        answers: list[tuple[str, httpx.Response]] = []
        for path in ("/", "/api/snapshot", "/events", "/static/settings.js", "/no-such-page", "/?token="):
            answer = await client.get(path)
            answers.append((f"GET {path} without the cookie", answer))
            assert answer.status_code == 401, (path, answer.status_code)
            assert "set-cookie" not in answer.headers
        for wrong in ("x" * len(page.secret), page.secret[:-1], page.secret + "x", page.secret[1:] + "x"):
            answer = await client.get(f"/?token={wrong}")
            answers.append(("a wrong token", answer))
            assert answer.status_code == 403 and "set-cookie" not in answer.headers, answer.status_code
        assert (await client.post(page.url)).status_code == 401  # the exchange is a GET

        way_in = await client.get(page.url)
        answers.append(("the way in", way_in))
        assert way_in.status_code == 303 and way_in.headers["location"] == "/"
        (set_cookie,) = way_in.headers.get_list("set-cookie")
        name_value, *attributes = [a.strip() for a in set_cookie.split(";")]
        name, _, session = name_value.partition("=")
        assert name == f"kxen_settings_{page.port}"
        assert sorted(attributes) == ["HttpOnly", "Path=/", "SameSite=Strict"]  # no Domain, no lifetime
        assert session and session != page.secret and len(session) >= 32
        client.cookies.clear()
        page.session = session

        home = await page.get("/")
        answers.append(("the page", home))
        assert home.status_code == 200 and home.headers["content-type"].startswith("text/html")
        assert page.secret not in home.text  # the secret left the address bar and is nowhere on the page
        assert session not in home.text  # HttpOnly: the page never holds its session either
        (csrf,) = re.findall(r'<meta name="kxen-csrf" content="([^"]+)">', home.text)
        assert csrf not in (page.secret, session)
        for path in ("/api/snapshot", "/static/settings.js", "/static/settings.css"):
            answer = await page.get(path)
            answers.append((path, answer))
            assert answer.status_code == 200, path
        async with page.stream() as stream:
            assert stream.status == 200
            await stream.until("the servers", lambda parts: "servers" in parts)
            locked_headers("the event stream", stream.headers)

        for cookie in (
            f"{page.cookie_name}={session[:-1]}",  # a wrong value
            f"kxen_settings_{page.port + 1}={session}",  # the right value under another page's name
            f"{page.cookie_name}=",
            f'{page.cookie_name}="{session}',  # a malformed header
            f"other=1; {page.cookie_name}x={session}",
        ):
            answer = await client.get("/api/snapshot", headers={"cookie": cookie})
            answers.append((cookie, answer))
            assert answer.status_code == 401, cookie
        # a browser sends every cookie of 127.0.0.1, whatever the port: another page's beside this one's is fine
        both = await client.get("/api/snapshot", headers={"cookie": f"kxen_settings_1={'y' * 43}; {page.cookie}"})
        assert both.status_code == 200
        answers.append(("two cookies", both))
        for where, answer in answers:
            locked_headers(where, answer.headers)
        for answer in page.answers:
            locked_headers(str(answer.request.url.path), answer.headers)


# --- refused requests change nothing -------------------------------------------------------------

UNUSED = "http://127.0.0.1:9/mcp"  # a remote server nobody dials while remote MCP is off


class Lock:
    """A served page with something real behind every state-changing route: a remote server that
    remote MCP on would start (and record in config.toml), a user server added to mcp.json since
    the load (a reload would start it), a running demo server (a restart changes its process) and
    a project server whose launch waits for approval (an approval would start it)."""

    def __init__(self, home: Any, ws: Path) -> None:
        self.home = home
        home.write_settings(REMOTE_OFF)
        home.write_servers({"demo": demo_entry(), "r": remote(UNUSED)})
        write_project(ws, {"p": demo_entry()})
        trust(home.path, ws)
        self.files = [home.path / "config.toml", home.path / "mcp.json", ws / ".kxen" / "mcp.json"]
        self.rt = Runtime(home=home.path, workspace=ws, pm=make_plugin_manager(allow=["stdio", "http"]))
        self.approval = ""

    async def ready(self, page: Page) -> None:
        snap = await page.until(
            "demo ready and p's launch waiting",
            lambda s: bool(s["approvals"]["pending"]) and states(s).get("demo") == "ready",
        )
        (pending,) = snap["approvals"]["pending"]
        assert (pending["kind"], pending["server"]) == ("stdio_launch", "p")
        self.approval = pending["id"]
        entry = {"demo": demo_entry(), "r": remote(UNUSED), "late": demo_entry()}
        self.home.write_servers(entry)  # on disk, not loaded: only a reload would start it

    def targets(self) -> list[tuple[str, dict[str, Any]]]:
        return [
            ("/api/remote", {"enabled": True, "acknowledge": ["r"]}),
            ("/api/reload", {}),
            ("/api/servers/demo/restart", {}),
            (f"/api/approvals/{self.approval}", {"approved": True}),
        ]


def altered(token: str) -> str:
    """``token`` with its last character changed (a fixed replacement is the token itself when the
    token already ends with it: one run in 64)."""
    return token[:-1] + ("B" if token.endswith("A") else "A")


async def refused(lock: Lock, what: str, status: int, send: Awaitable[Any]) -> Any:
    """Send one request (``send``, not yet started) that must be refused with ``status``;
    nothing may change."""
    before = await state(lock.rt, lock.files)
    answer = await send
    code = answer.status_code if isinstance(answer, httpx.Response) else answer.status
    assert code == status, f"{what}: {code} (expected {status}): {answer}"
    headers = answer.headers if isinstance(answer, httpx.Response) else dict(answer.headers)
    if headers.get("content-type") == "application/json":  # the page's refusal (not the HTTP parser's)
        locked_headers(what, headers)
        body = answer.json()
        assert isinstance(body.get("error"), str) and body["error"], (what, body)
    # (every route answers after its action: a change a hole let through would show by now)
    assert await state(lock.rt, lock.files) == before, f"{what}: something changed"
    return answer


async def controls(page: Page, lock: Lock) -> None:
    """The same targets asked properly do change things: the checks above would have seen a hole."""
    before = await state(lock.rt, lock.files)
    assert (await page.post("/api/servers/demo/restart")).status_code == 200
    old_pid = before["servers"]["demo"][1]
    await page.until("demo restarted", lambda s: pid_of(s, "demo") not in (None, old_pid))
    assert (await page.post(f"/api/approvals/{lock.approval}", {"approved": True})).status_code == 200
    await page.until("p started", lambda s: states(s).get("p") == "ready")
    assert (await page.post("/api/reload")).status_code == 200
    assert "late" in states(await page.snapshot())
    answer = await page.post("/api/remote", {"enabled": True, "acknowledge": ["r"]})
    assert answer.json() == {"ok": True, "enabled": True}
    after = await state(lock.rt, lock.files)
    assert after["files"][str(lock.files[0])] != before["files"][str(lock.files[0])]  # config.toml recorded it
    assert after["remote"][0] is True


def lock_headers(page: Page, *, without: str = "", **changed: str) -> dict[str, str]:
    """The page's own headers for a change, one left out or some changed."""
    headers = {**page.headers(), **{k.replace("_", "-"): v for k, v in changed.items()}}
    return {k: v for k, v in headers.items() if k != without}


def raw_head(page: Page, *extra: tuple[str, str], host: bool = True) -> list[tuple[str, str]]:
    """The page's own headers for a change, as raw lines (plus ``extra``, before them)."""
    return [
        *extra,
        *([("Host", page.host)] if host else []),
        ("Cookie", page.cookie),
        ("Origin", page.origin),
        ("X-Kxen-CSRF", page.csrf),
        ("Content-Type", "application/json"),
        ("Connection", "close"),
    ]


async def test_requests_without_the_lock_are_refused_and_change_nothing(kxen_home, ws):
    lock = Lock(kxen_home, ws)
    async with served(lock.rt) as page:
        await lock.ready(page)
        other = f"127.0.0.1:{page.port + 1 if page.port < 65535 else page.port - 1}"
        cases = [
            ("no cookie", 401, "POST", lock_headers(page, without="cookie")),
            ("a wrong cookie", 401, "POST", lock_headers(page, cookie=f"{page.cookie_name}={'A' * 43}")),
            ("the secret as the cookie", 401, "POST", lock_headers(page, cookie=f"{page.cookie_name}={page.secret}")),
            ("no Origin", 403, "POST", lock_headers(page, without="origin")),
            ("a foreign Origin", 403, "POST", lock_headers(page, origin="http://evil.example")),
            ("Origin null", 403, "POST", lock_headers(page, origin="null")),
            ("another port's Origin", 403, "POST", lock_headers(page, origin=f"http://{other}")),
            ("localhost's Origin", 403, "POST", lock_headers(page, origin=f"http://localhost:{page.port}")),
            ("an https Origin", 403, "POST", lock_headers(page, origin=f"https://{page.host}")),
            ("no CSRF token", 403, "POST", lock_headers(page, without="x-kxen-csrf")),
            ("a wrong CSRF token", 403, "POST", lock_headers(page, x_kxen_csrf=altered(page.csrf))),
            ("the secret as CSRF token", 403, "POST", lock_headers(page, x_kxen_csrf=page.secret)),
            ("the session as CSRF token", 403, "POST", lock_headers(page, x_kxen_csrf=page.session)),
            ("no content type", 415, "POST", lock_headers(page, without="content-type")),
            ("text/plain", 415, "POST", lock_headers(page, content_type="text/plain")),
            ("a form", 415, "POST", lock_headers(page, content_type="application/x-www-form-urlencoded")),
            ("multipart", 415, "POST", lock_headers(page, content_type="multipart/form-data; boundary=x")),
            ("json-ish", 415, "POST", lock_headers(page, content_type="application/jsonp")),
            ("a GET", 405, "GET", lock_headers(page)),
            ("a PUT", 405, "PUT", lock_headers(page)),
            ("a DELETE", 405, "DELETE", lock_headers(page)),
        ]
        raw_cases = [
            ("Host evil.example", 421, [("Host", f"evil.example:{page.port}")], "1.1"),
            ("Host evil.example, no port", 421, [("Host", "evil.example")], "1.1"),
            ("Host of another port", 421, [("Host", other)], "1.1"),
            ("Host without a port", 421, [("Host", "127.0.0.1")], "1.1"),
            ("Host 0.0.0.0", 421, [("Host", f"0.0.0.0:{page.port}")], "1.1"),
            ("Host [::1]", 421, [("Host", f"[::1]:{page.port}")], "1.1"),
            ("Host with a user", 421, [("Host", f"a@{page.host}")], "1.1"),
            ("no Host, HTTP/1.0", 421, [], "1.0"),
            ("no Host, HTTP/1.1", 400, [], "1.1"),  # refused by the HTTP parser itself
            ("two Hosts", 400, [("Host", page.host), ("Host", page.host)], "1.1"),
            ("two Origins", 403, [("Host", page.host), ("Origin", page.origin)], "1.1"),
            ("two CSRF tokens", 403, [("Host", page.host), ("X-Kxen-CSRF", page.csrf)], "1.1"),
            ("two Cookie headers", 401, [("Host", page.host), ("Cookie", page.cookie)], "1.1"),
            ("two content types", 415, [("Host", page.host), ("Content-Type", "application/json")], "1.1"),
        ]
        for path, body in lock.targets():
            content = json.dumps(body).encode()
            for what, status, method, headers in cases:
                send = page.client.request(method, path, content=content, headers=headers)
                await refused(lock, f"{path}: {what}", status, send)
            for what, status, extra, version in raw_cases:
                head = raw_head(page, *extra, ("Content-Length", str(len(content))), host=False)
                data = request("POST", path, head, content, version=version)
                await refused(lock, f"{path}: {what}", status, raw(page.port, data))
        absolute = request("POST", "http://evil.example/api/reload", raw_head(page, ("Content-Length", "2")), b"{}")
        await refused(lock, "an absolute target", 404, raw(page.port, absolute))
        await controls(page, lock)


async def chunks_past_the_bound(conn: Any) -> None:
    """A chunked body one byte longer than MAX_BODY, never ended."""
    piece = b" " * 65536
    for _ in range(MAX_BODY // len(piece)):
        await conn.send(b"%x\r\n" % len(piece) + piece + b"\r\n")
    await conn.send(b"1\r\n \r\n")


async def test_bad_bodies_are_refused_and_change_nothing(kxen_home, ws):
    lock = Lock(kxen_home, ws)
    async with served(lock.rt) as page:
        await lock.ready(page)
        wrong_fields = {
            "/api/remote": [
                {"enabled": "yes"},
                {"enabled": 1},
                {"enabled": None},
                {"acknowledge": ["r"]},
                {"enabled": True, "acknowledge": "r"},
                {"enabled": True, "acknowledge": [1]},
                {"enabled": True, "acknowledge": ["r"] * 1001},
            ],
            "/api/approvals/": [
                {"approved": "true"},
                {"approved": 1},
                {},
                {"approved": True, "remember": 5},
                {"approved": True, "remember": "always"},  # a launch is approved for this call only
            ],
        }
        for path, _ in lock.targets():
            bad = [
                (b'{"enabled": tru', "not JSON"),
                (b"[true]", "a JSON array"),
                (b'"enabled"', "a JSON string"),
                (b"null", "JSON null"),
                (b"1e999", "a number"),
                (b'{"enabled": "\xff\xfe"}', "not UTF-8"),
                (b"[" * 100_000, "nested past the recursion limit"),
            ]
            key = "/api/approvals/" if path.startswith("/api/approvals/") else path
            bad += [(json.dumps(body).encode(), f"fields {body}") for body in wrong_fields.get(key, [])]
            if key in wrong_fields:  # a field the route reads, as NaN (Python's json takes it)
                bad.append((b'{"enabled": NaN, "approved": NaN}', "NaN"))
            for content, what in bad:
                send = page.client.post(path, content=content, headers=page.headers())
                await refused(lock, f"{path}: {what}", 400, send)

            # a huge body, honestly announced: refused from its Content-Length, before it is read
            # (a length too long to be one is refused by the HTTP parser itself: a 400)
            for length, status in ((MAX_BODY + 1, 413), (10**6, 413), (10**30, 400), (-1, 400)):
                data = request("POST", path, raw_head(page, ("Content-Length", str(length))))
                await refused(lock, f"{path}: Content-Length {length}", status, raw(page.port, data))
            # a huge body, chunked with no length: refused once more than MAX_BODY bytes came
            data = request("POST", path, raw_head(page, ("Transfer-Encoding", "chunked")))
            await refused(lock, f"{path}: a huge chunked body", 413, raw(page.port, data, then=chunks_past_the_bound))
            # a Content-Length shorter than the body: what is read is cut at it (not JSON)
            data = request(
                "POST", path, raw_head(page, ("Content-Length", "5")), b'{"enabled": true, "approved": true}'
            )
            await refused(lock, f"{path}: a short Content-Length", 400, raw(page.port, data))
        await controls(page, lock)


async def test_a_body_that_never_finishes_is_dropped_within_the_bound(kxen_home, ws, monkeypatch):
    """The bound is BODY_SECONDS (10 s); 0.5 s here, so that each case does not wait 10 s. The
    guard is the same for every route: each case is aimed at one of the targets."""
    monkeypatch.setattr(kxen_settings_web.guard, "BODY_SECONDS", 0.5)
    lock = Lock(kxen_home, ws)
    async with served(lock.rt) as page:
        await lock.ready(page)
        body = json.dumps({"enabled": True, "approved": True}).encode()

        async def trickle(conn: Any) -> None:  # a byte now and then: the bound is for the whole body
            for ch in body[1:]:
                await anyio.sleep(0.1)
                await conn.send(bytes([ch]))

        cases = [
            ("a longer Content-Length", [("Content-Length", str(len(body) + 10))], body, None),
            ("no body at all", [("Content-Length", "2")], b"", None),
            ("a chunked body never ended", [("Transfer-Encoding", "chunked")], b"2\r\n{}\r\n", None),
            ("a trickle", [("Content-Length", str(len(body) + 1))], body[:1], trickle),
        ]
        for (path, _), (what, extra, sent, then) in zip(lock.targets(), cases, strict=True):
            data = request("POST", path, raw_head(page, *extra), sent)
            answer = await refused(lock, f"{path}: {what}", 408, raw(page.port, data, then=then, seconds=10))
            assert "did not arrive within 0.5 s" in answer.json()["error"]
        for path, _ in lock.targets():
            # a client that leaves mid-body: nothing to answer, nothing changes
            before = await state(lock.rt, lock.files)
            async with await anyio.connect_tcp("127.0.0.1", page.port) as conn:
                await conn.send(request("POST", path, raw_head(page, ("Content-Length", "100")), b'{"enabled": '))
            assert (await page.get("/api/snapshot")).status_code == 200  # the page still serves
            assert await state(lock.rt, lock.files) == before, f"{path}: a client that left changed something"
        await controls(page, lock)


async def test_a_query_of_many_fields_is_a_plain_refusal(kxen_home, ws):
    kxen_home.write_servers({"demo": demo_entry()})
    rt = Runtime(home=kxen_home.path, workspace=ws, pm=make_plugin_manager(allow=["stdio"]))
    async with served(rt, enter=False) as page:
        for query in ("a=1&b=2&c=3&d=4&e=5", f"token={page.secret}&" + "&".join(f"x{i}=1" for i in range(50))):
            answer = await page.client.get(f"/?{query}")
            assert answer.status_code == 400, (query, answer.status_code, answer.text)
            assert "set-cookie" not in answer.headers
            locked_headers(query, answer.headers)
        assert (await page.client.get(f"/?token={page.secret}&utm=x")).status_code == 303


# --- server text is shown as text ----------------------------------------------------------------

BAD = '<script>alert(1)</script> "><img src=x onerror=alert(1)> \x1b[31mred\x1b[0m \x1b]0;title\x07 back\rover'
#: how each part of BAD shows on the page (HTML-escaped, control characters as visible escapes)
SHOWN = (
    "&lt;script&gt;alert(1)&lt;/script&gt;",
    "&lt;img src=x onerror=alert(1)&gt;",
    "\\x1b[31mred",
    "\\x1b]0;title\\x07",
    "back\\x0dover",
)
#: how a JSON value holding BAD shows (an approval's arguments)
SHOWN_AS_JSON = (*SHOWN[:2], "\\u001b[31mred", "\\u001b]0;title\\u0007", "back\\rover")

HOSTILE_SERVER = r'''
"""A stdio MCP server whose every text is hostile: stderr, server info, instructions, tool
description and title, a tool result, and (mode "fail") the initialize error."""
import json, sys
BAD = %r
mode = sys.argv[1]
sys.stderr.write("stderr says: " + BAD + "\n")
sys.stderr.flush()
def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()
for line in sys.stdin:
    message = json.loads(line)
    rid, method = message.get("id"), message.get("method")
    if rid is None:
        continue
    if method == "initialize" and mode == "fail":
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32000, "message": "init failed: " + BAD}})
    elif method == "initialize":
        result = {"protocolVersion": message["params"]["protocolVersion"], "capabilities": {"tools": {}},
                  "serverInfo": {"name": BAD, "version": BAD}, "instructions": BAD}
        send({"jsonrpc": "2.0", "id": rid, "result": result})
    elif method == "tools/list":
        schema = {"type": "object", "properties": {"x": {"type": "string", "description": BAD}}}
        tools = [{"name": "hostile", "title": BAD, "description": "described as " + BAD, "inputSchema": schema},
                 {"name": 'x"><img src=x onerror=alert(1)>', "description": BAD, "inputSchema": schema}]
        send({"jsonrpc": "2.0", "id": rid, "result": {"tools": tools}})
    elif method == "tools/call":
        send({"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": "result: " + BAD}]}})
    else:
        send({"jsonrpc": "2.0", "id": rid, "result": {}})
'''


def shown_as_text(where: str, html: str, *, page: bool = False) -> None:
    """No markup and no control character from a server in ``html``."""
    assert html.count("<script") == (1 if page else 0), f"{where}: a script element: {html[:3000]}"
    if page:
        assert '<script src="/static/settings.js" defer></script>' in html
    assert "<img" not in html, f"{where}: an img element"
    assert not re.search(r"<[^>]*\son[a-z]+\s*=", html), f"{where}: an event handler attribute"
    for ch in ("\x1b", "\x07", "\r", "\x00"):
        assert ch not in html, f"{where}: a raw {ch!r}"


def json_as_text(where: str, body: bytes) -> None:
    """An API answer: no markup-looking bytes, no control character (JSON escapes them)."""
    for bad in (b"<script", b"<img", b"\x1b", b"\x07", b"\r"):
        assert bad not in body, f"{where}: {bad!r} in {body[:2000]!r}"


async def test_server_text_with_html_script_and_terminal_escapes_is_shown_as_text(kxen_home, ws, tmp_path):
    script = tmp_path / "hostile_server.py"
    script.write_text(HOSTILE_SERVER % BAD)
    servers = {
        "h": {"command": sys.executable, "args": [str(script), "ok"], "defaultToolPolicy": "ask"},
        "f": {"command": sys.executable, "args": [str(script), "fail"]},
    }
    kxen_home.write_servers(servers)
    rt = Runtime(home=kxen_home.path, workspace=ws, pm=make_plugin_manager(allow=["stdio"]))
    async with served(rt) as page, page.stream() as stream:
        await page.until(
            "h ready with its stderr read, f failed",
            lambda s: (
                {x["name"]: (x["state"], "red" in (x["stderr"] or x["error"] or "")) for x in s["servers"]}
                == {"h": ("ready", True), "f": ("failed", True)}
            ),
        )
        parts = await stream.until(
            "h's stderr", lambda p: "stderr says" in p.get("servers", "") and "red" in p["servers"]
        )
        servers_html = parts["servers"]
        assert all(text in servers_html for text in SHOWN), servers_html  # stderr and the error, escaped
        assert "init failed: &lt;script&gt;" in servers_html
        assert all(text in parts["tool-choice"] for text in SHOWN[:3]), parts["tool-choice"]  # the description

        # an ask call with hostile arguments: its approval shows them as text
        called: dict[str, Any] = {}

        async def call() -> None:
            called["answer"] = await page.post("/api/call", {"tool": "h__hostile", "arguments": {"x": BAD}})

        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            snap = await page.until("the call's approval", lambda s: bool(s["approvals"]["pending"]))
            (pending,) = snap["approvals"]["pending"]
            approvals = (await stream.until("the approval", lambda p: "data-approval" in p.get("approvals", "")))[
                "approvals"
            ]
            # the arguments are shown as the JSON the tool gets: JSON's escapes, then HTML's
            assert all(text in approvals for text in SHOWN_AS_JSON), approvals
            home = (await page.get("/")).text
            shown_as_text("the page with an approval", home, page=True)
            assert (await page.post(f"/api/approvals/{pending['id']}", {"approved": True})).status_code == 200
        answer = called["answer"]
        assert answer.status_code == 200
        result = answer.json()
        assert result["isError"] is False and result["text"] == "result: " + BAD  # what the agent gets, as it is
        json_as_text("the call's answer", answer.content)

        # a config problem whose text holds HTML: listed escaped; the servers keep running
        before = {s["name"]: (s["state"], s["transportInfo"]) for s in (await page.snapshot())["servers"]}
        (kxen_home.path / "mcp.json").write_text(
            json.dumps({"mcpServers": {**servers, "h": {**servers["h"], "<script>alert(1)</script>": 1}}})
        )
        refused = await page.post("/api/reload")
        assert refused.status_code == 409, refused.text
        problems = refused.json()["problems"]
        assert any("unknown key(s): <script>alert(1)</script>" in p for p in problems), problems
        json_as_text("the refused reload", refused.content)
        shown = await stream.until("the problem", lambda p: "unknown key" in p.get("problems", ""))
        assert "mcpServers.h: unknown key(s): &lt;script&gt;alert(1)&lt;/script&gt;" in shown["problems"]
        snap = await page.snapshot()
        assert snap["problems"] == problems
        assert {s["name"]: (s["state"], s["transportInfo"]) for s in snap["servers"]} == before  # same processes

        home = (await page.get("/")).text
        shown_as_text("the page", home, page=True)
        assert all(text in home for text in SHOWN)
        assert "unknown key(s): &lt;script&gt;alert(1)&lt;/script&gt;" in home
        for i, event in enumerate(stream.events):
            for part, html in event.items():
                shown_as_text(f"event {i} part {part}", html)
        for sent in page.answers:
            if sent.headers.get("content-type", "").startswith("application/json"):
                json_as_text(f"{sent.request.method} {sent.request.url.path}", sent.content)
        listed = await page.get("/api/snapshot")
        for entry in listed.json()["snapshot"]["servers"]:
            for key in ("error", "stderr"):
                assert "\x1b" not in (entry[key] or "") and "\r" not in (entry[key] or ""), (key, entry[key])
        for tool in listed.json()["tools"]:
            assert "\x1b" not in tool["about"] and "\r" not in tool["about"], tool


# --- secrets are never rendered --------------------------------------------------------------------

HEADER_SECRET = "hdr-5ecret-AAAA-1111"
ENV_SECRET = "env-5ecret-BBBB-2222"
QUERY_SECRET = "qry-5ecret-CCCC-3333"
PROJECT_SECRET = "prj-5ecret-DDDD-4444"
SECRETS = (HEADER_SECRET, ENV_SECRET, QUERY_SECRET, PROJECT_SECRET)


def echoing(fail_on: str) -> Callable[[Any], Awaitable[Any]]:
    """A Streamable HTTP server that answers ``fail_on`` with an error echoing every request
    header and the request's path (query included)."""

    async def respond(request: Any) -> Any:
        if request.method != "POST":
            return Response(405 if request.method == "GET" else 200)
        message = json.loads(request.body)
        if "id" not in message:
            return Response(202)
        rid, method = message["id"], message["method"]
        if method == fail_on:
            echo = f"you sent {request.path} with " + json.dumps(request.headers)
            body = {"jsonrpc": "2.0", "id": rid, "error": {"code": -32001, "message": echo, "data": echo}}
        elif method == "initialize":
            info = {"name": "echoing", "version": "0"}
            body = {
                "jsonrpc": "2.0",
                "id": rid,
                "result": {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": info},
            }
        elif method == "tools/list":
            tool = {"name": "ping_tool", "description": "answers", "inputSchema": {"type": "object"}}
            body = {"jsonrpc": "2.0", "id": rid, "result": {"tools": [tool]}}
        else:
            body = {"jsonrpc": "2.0", "id": rid, "result": {}}
        return Response(200, json.dumps(body).encode(), "application/json")

    return respond


def secret_servers(home: Any, ws: Path, failing: Any, calling: Any) -> None:
    """A stdio server that prints its sensitive env value on stderr, two remote servers with a
    secret header and a URL query value that echo both (in initialize's error, in a call's), and a
    project server with a sensitive env value whose launch waits for approval."""
    noisy = {
        "command": "sh",
        "args": ["-c", f'printf "token=%s\\n" "$API_TOKEN" >&2; exec "{sys.executable}" "{DEMO}"'],
        "env": {"API_TOKEN": ENV_SECRET},
    }
    headers = {"X-Api-Key": HEADER_SECRET, "Authorization": f"Bearer {HEADER_SECRET}"}
    home.write_servers(
        {
            "noisy": noisy,
            "bad": remote(f"{failing.base}/mcp?api_key={QUERY_SECRET}", headers=headers),
            "good": remote(f"{calling.base}/mcp?api_key={QUERY_SECRET}", headers=headers),
        }
    )
    write_project(ws, {"p": demo_entry(env={"SERVICE_PASSWORD": PROJECT_SECRET})})
    trust(home.path, ws)


def settled_with_secrets(snap: dict[str, Any]) -> bool:
    noisy = next((x for x in snap["servers"] if x["name"] == "noisy"), {})
    return (
        {x["name"]: x["state"] for x in snap["servers"]}
        == {"noisy": "ready", "bad": "failed", "good": "ready", "p": "awaiting_approval"}
        and bool(snap["approvals"]["pending"])
        and "token=" in (noisy.get("stderr") or "")
    )


def assert_none_in(texts: dict[str, str], secrets: Any) -> None:
    for where, text in texts.items():
        for secret in secrets:
            at = text.find(secret)
            assert at < 0, f"a secret in {where}: ...{text[max(0, at - 300) : at]}"


async def test_configured_secrets_never_reach_the_page_its_events_or_answers(kxen_home, ws):
    async with local_http(echoing("initialize")) as failing, local_http(echoing("tools/call")) as calling:
        kxen_home.write_settings(REMOTE_ON)
        secret_servers(kxen_home, ws, failing, calling)
        rt = Runtime(home=kxen_home.path, workspace=ws, pm=make_plugin_manager(allow=["stdio", "http"]))
        acknowledge(kxen_home.path, rt)
        async with served(rt) as page, page.stream() as stream:
            snap = await page.until("every server settled, p's launch waiting", settled_with_secrets)
            # the secrets did go where they belong (so the grep below could find them)
            assert any(r.headers.get("x-api-key") == HEADER_SECRET for r in failing.requests + calling.requests)
            assert all(QUERY_SECRET in r.path for r in failing.requests + calling.requests if r.method == "POST")
            servers = {x["name"]: x for x in snap["servers"]}
            assert "token=***" in servers["noisy"]["stderr"]
            assert "you sent" in servers["bad"]["error"] and "***" in servers["bad"]["error"]  # the echo, scrubbed
            (pending,) = snap["approvals"]["pending"]
            assert "SERVICE_PASSWORD" in json.dumps(pending["details"])  # its key, and a digest of its value
            assert sorted(r["url"] for r in snap["remote"]["servers"]) == sorted(
                [f"{failing.base}/mcp?api_key=***", f"{calling.base}/mcp?api_key=***"]
            )
            call = await page.post("/api/call", {"tool": "good__ping_tool", "arguments": {}})
            assert call.status_code == 200 and call.json()["isError"] is True and "you sent" in call.json()["text"]
            await stream.until("the approval", lambda p: "SERVICE_PASSWORD" in p.get("approvals", ""))
            await stream.until("noisy's stderr", lambda p: "token=***" in p.get("servers", ""))
            home = await page.get("/")
            texts = {
                "the page": home.text,
                "the events": bytes(stream.raw).decode() + json.dumps(stream.events),
                "the answers": "\n".join(f"{a.headers}\n{a.text}" for a in page.answers),
            }
    assert_none_in(texts, SECRETS)


async def test_kxen_settings_signs_in_and_no_token_or_secret_reaches_a_page_an_event_or_its_log(
    kxen_home, ws, start_peer
):
    """``kxen settings --no-open -vv --log-file`` over the OAuth peer (--leaky: its tools echo the
    caller's tokens) and the servers of the test above: a full sign-in started from the page's
    API, its authorization URL walked like a browser to kxen's loopback callback; then every page,
    event and answer, the command's output and log, and every file under the home are grepped
    for the stored tokens and the configured secrets."""
    url, _ = auth_peer(start_peer, "--leaky")
    log_file = kxen_home.path / "logs" / "kxen.log"
    log_file.parent.mkdir()
    async with local_http(echoing("initialize")) as failing, local_http(echoing("tools/call")) as calling:
        kxen_home.write_settings(REMOTE_ON)
        secret_servers(kxen_home, ws, failing, calling)
        entries = json.loads((kxen_home.path / "mcp.json").read_text())["mcpServers"]
        kxen_home.write_servers({**entries, "r": remote(url)})
        acknowledge(
            kxen_home.path, Runtime(home=kxen_home.path, workspace=ws, pm=make_plugin_manager(allow=["stdio", "http"]))
        )
        plugins = "stdio,http,sse,oauth,settings"
        async with settings_command(kxen_home.path, ws, "-vv", "--log-file", str(log_file), plugins=plugins) as cmd:
            async with visit(cmd.url) as page, page.stream() as stream:
                await page.until(
                    "r needs a sign-in, the others settled",
                    lambda s: (
                        states(s).get("r") == "needs_login"
                        and settled_with_secrets({**s, "servers": [x for x in s["servers"] if x["name"] != "r"]})
                    ),
                )
                started = await page.post("/api/servers/r/login")
                assert started.status_code == 200, started.text
                flow, authorization = started.json()["flowId"], started.json()["url"]
                async with httpx.AsyncClient(trust_env=False, follow_redirects=False, timeout=WAIT) as browser:
                    sent = await browser.get(authorization)
                    assert sent.status_code in (302, 303, 307), sent.text
                    callback = sent.headers["location"]
                    assert callback.startswith("http://127.0.0.1:") and "code=" in callback
                    landed = await browser.get(callback)
                    assert landed.status_code == 200, landed.text
                snap = await page.until(
                    "r ready and its sign-in complete",
                    lambda s: states(s).get("r") == "ready" and [x["state"] for x in s["logins"]] == ["complete"],
                )
                assert snap["logins"][0]["flowId"] == flow
                await stream.until("r ready", lambda p: "complete" in p.get("logins", ""))
                doc = stored()
                tokens = [t[k] for t in doc["tokens"] for k in ("accessToken", "refreshToken") if t.get(k)]
                tokens += [c["clientSecret"] for c in doc.get("clients", []) if c.get("clientSecret")]
                assert len(tokens) >= 2, doc.keys()
                leak = await page.post("/api/call", {"tool": "r__leak", "arguments": {}})
                assert leak.json()["text"] == "access=*** refresh=***", leak.text  # the server echoed both
                leak_error = await page.post("/api/call", {"tool": "r__leak_error", "arguments": {}})
                assert "access=*** refresh=***" in leak_error.json()["text"], leak_error.text
                home = await page.get("/")
                signed_out = await page.post("/api/servers/r/logout")
                assert signed_out.json() == {"ok": True, "removed": True}
                await page.until("r signed out", lambda s: states(s).get("r") == "needs_login")
                await stream.until("r signed out", lambda p: "Needs sign-in" in p.get("servers", ""))
                texts = {
                    "the page": home.text,
                    "the events": bytes(stream.raw).decode() + json.dumps(stream.events),
                    "the answers": "\n".join(f"{a.request.url}\n{a.headers}\n{a.text}" for a in page.answers),
                }
    assert cmd.code == 130, (cmd.code, cmd.err[-3000:])  # Ctrl-C: 128 + SIGINT, every server closed
    texts["the command's output"] = cmd.out + cmd.err
    files = {p: p.read_text(errors="replace") for p in sorted(kxen_home.path.rglob("*")) if p.is_file()}
    assert kxen_home.path / "logs" / "noisy.stderr.log" in files
    # the config holds the configured secrets, and a server's own stderr log (0600) keeps what it
    # printed whole, by design (docs/cli.md): neither may hold a token
    kept = {p: files.pop(p) for p in list(files) if p.name == "mcp.json" or p.name.endswith(".stderr.log")}
    assert_none_in({str(p): text for p, text in kept.items()}, tokens)
    texts["the home's other files"] = "\n".join(files.values())
    log = log_file.read_text()
    # the log is there, at debug level, and saw the sign-in and the echoes (scrubbed)
    assert "kxen.traffic" in log and "r: ready" in log and "access=***" in log and "you sent" in log, log[-3000:]
    assert "/api/" not in cmd.out  # nothing but the URL on stdout
    assert_none_in(texts, [*tokens, *SECRETS])


# --- two pages on one home ------------------------------------------------------------------------


async def test_two_pages_on_one_home_have_their_own_port_secret_and_cookie(kxen_home, ws):
    kxen_home.write_servers({"demo": demo_entry()})

    def runtime() -> Runtime:
        return Runtime(home=kxen_home.path, workspace=ws, pm=make_plugin_manager(allow=["stdio"]))

    async with served(runtime()) as a, served(runtime()) as b:
        assert a.port != b.port
        assert len({a.secret, b.secret}) == len({a.session, b.session}) == len({a.csrf, b.csrf}) == 2
        assert a.cookie_name != b.cookie_name
        for mine, other in ((a, b), (b, a)):
            assert (await other.client.get("/", headers={"cookie": mine.cookie})).status_code == 401
            smuggled = f"{other.cookie_name}={mine.session}"  # this page's session under the other's name
            assert (await other.client.get("/api/snapshot", headers={"cookie": smuggled})).status_code == 401
            assert (await other.client.get(f"/?token={mine.secret}")).status_code == 403
            crossed = await other.post("/api/reload", headers={**other.headers(), "x-kxen-csrf": mine.csrf})
            assert crossed.status_code == 403
            # a browser holds both cookies and sends both to either port: each page takes its own
            both = f"{mine.cookie}; {other.cookie}"
            assert (await other.client.get("/api/snapshot", headers={"cookie": both})).status_code == 200
            assert (await mine.post("/api/reload")).status_code == 200


async def test_two_kxen_settings_on_one_home_get_their_own_port_and_secret(kxen_home, ws):
    kxen_home.write_servers({"demo": demo_entry()})
    async with (
        settings_command(kxen_home.path, ws, plugins="stdio,settings") as one,
        settings_command(kxen_home.path, ws, plugins="stdio,settings") as two,
        visit(one.url) as a,
        visit(two.url) as b,
    ):
        assert a.port != b.port and a.secret != b.secret and a.session != b.session
        for mine, other in ((a, b), (b, a)):
            assert (await other.client.get("/api/snapshot", headers={"cookie": mine.cookie})).status_code == 401
            smuggled = f"{other.cookie_name}={mine.session}"
            assert (await other.client.get("/api/snapshot", headers={"cookie": smuggled})).status_code == 401
            assert (await other.client.get(f"/?token={mine.secret}")).status_code == 403
            snap = await mine.until("demo ready", lambda s: states(s) == {"demo": "ready"})
            assert snap["approvals"]["held"] is True  # each process holds its own runtime's approvals
    assert (one.code, two.code) == (130, 130), (one.err[-2000:], two.err[-2000:])
