"""Helpers of the Settings page's HTTP tests (test_security.py, test_http_api.py): the page served
for real (:func:`served`: ``kxen_settings_web.serve`` in a task group, on a free 127.0.0.1 port),
a client that came in through the printed URL (:class:`Page`), its live stream read in the
background (:class:`Stream`), raw HTTP/1.1 over a socket for what httpx would tidy up (:func:`raw`),
and what "nothing changed" compares (:func:`state`).

The core tests' helpers (tests/support.py, tests/remote_support.py, tests/oauth_support.py) are
re-exported from here: their directory is put on ``sys.path`` as pytest does for the core tests.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import httpx

if sys.version_info < (3, 11):  # pragma: no cover - anyio brings the backport there
    from exceptiongroup import BaseExceptionGroup

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT / "tests") not in sys.path:
    sys.path.append(str(ROOT / "tests"))

from oauth_support import OAUTH_PLUGINS, auth_peer, stored  # noqa: E402
from remote_support import REMOTE_OFF, REMOTE_ON, Request, Response, local_http, remote  # noqa: E402
from support import DEMO, demo_entry, write_project  # noqa: E402

from kxen_core import Runtime  # noqa: E402
from kxen_core.config.trust import acknowledge_remote  # noqa: E402

#: seconds any one wait of these tests may take
WAIT = 30
CSRF = re.compile(r'<meta name="kxen-csrf" content="([^"]+)">')


class Page:
    """A served page and an httpx client that came in through its URL (cookie and CSRF token
    taken as the page's own script would have them)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.port = int(url.split(":")[2].split("/")[0])
        self.secret = url.split("token=", 1)[1]
        self.origin = f"http://127.0.0.1:{self.port}"
        self.host = f"127.0.0.1:{self.port}"
        self.cookie_name = f"kxen_settings_{self.port}"
        self.session = ""
        self.csrf = ""
        #: every answer this client got (headers and body), for the grep of secrets
        self.answers: list[httpx.Response] = []
        self.client = httpx.AsyncClient(
            base_url=self.origin,
            trust_env=False,  # loopback only: never a proxy from the environment
            follow_redirects=False,
            timeout=httpx.Timeout(WAIT),
            event_hooks={"response": [self._record]},
        )

    async def _record(self, response: httpx.Response) -> None:
        if not response.request.headers.get("accept", "").startswith("text/event-stream"):
            await response.aread()
            self.answers.append(response)

    async def enter(self) -> None:
        way_in = await self.client.get(self.url)
        assert way_in.status_code == 303, way_in.text
        self.session = way_in.cookies[self.cookie_name]
        self.client.cookies.clear()  # sent by hand below: each request says what it carries
        page = await self.get("/")
        assert page.status_code == 200, page.text
        (self.csrf,) = CSRF.findall(page.text)

    @property
    def cookie(self) -> str:
        return f"{self.cookie_name}={self.session}"

    def headers(self, **extra: str) -> dict[str, str]:
        """What the page's own script sends with a change."""
        return {
            "cookie": self.cookie,
            "origin": self.origin,
            "x-kxen-csrf": self.csrf,
            "content-type": "application/json",
            **extra,
        }

    async def get(self, path: str, **kw: Any) -> httpx.Response:
        return await self.client.get(path, headers={"cookie": self.cookie, **kw.pop("headers", {})}, **kw)

    async def post(self, path: str, body: Any = None, *, headers: dict[str, str] | None = None) -> httpx.Response:
        content = json.dumps({} if body is None else body).encode()
        return await self.client.post(path, content=content, headers=headers if headers is not None else self.headers())

    async def snapshot(self) -> dict[str, Any]:
        answer = await self.get("/api/snapshot")
        assert answer.status_code == 200, answer.text
        return answer.json()["snapshot"]

    async def until(self, what: str, predicate: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        """The first API snapshot ``predicate`` accepts (polled, bounded by WAIT)."""
        snap: dict[str, Any] = {}
        with anyio.move_on_after(WAIT):
            while not predicate(snap := await self.snapshot()):
                await anyio.sleep(0.05)
            return snap
        raise AssertionError(f"not within {WAIT} s: {what}; last snapshot: {json.dumps(snap)[:3000]}")

    @asynccontextmanager
    async def stream(self) -> AsyncIterator[Stream]:
        """The page's live stream, read in the background for the block."""
        stream = Stream()
        async with _unwrapped(), anyio.create_task_group() as tg:
            await tg.start(stream.read, self.client, self.cookie)
            try:
                yield stream
            finally:
                tg.cancel_scope.cancel()


class Stream:
    """The ``render`` events of one live stream: ``raw`` (the bytes), ``events`` (each decoded:
    part id to HTML) and ``parts`` (every part as the page shows it now)."""

    def __init__(self) -> None:
        self.raw = bytearray()
        self.events: list[dict[str, str]] = []
        self.parts: dict[str, str] = {}
        self.status = 0
        self.headers = httpx.Headers()
        self._seen = 0
        self._event = ""
        self._data: list[str] = []
        self._changed = anyio.Event()

    async def read(self, client: httpx.AsyncClient, cookie: str, *, task_status: Any) -> None:
        headers = {"cookie": cookie, "accept": "text/event-stream"}
        async with client.stream("GET", "/events", headers=headers, timeout=httpx.Timeout(WAIT, read=None)) as r:
            self.status, self.headers = r.status_code, r.headers
            task_status.started()
            async for chunk in r.aiter_raw():
                self.feed(chunk)

    def feed(self, chunk: bytes) -> None:
        """Take the next bytes of the stream (server-sent events: ``event:``/``data:`` lines)."""
        self.raw += chunk
        while b"\n" in self.raw[self._seen :]:
            end = self.raw.index(b"\n", self._seen)
            line = bytes(self.raw[self._seen : end]).decode().rstrip("\r")
            self._seen = end + 1
            if line.startswith("event:"):
                self._event = line[6:].strip()
            elif line.startswith("data:"):
                self._data.append(line[5:].removeprefix(" "))
            elif not line and self._data:
                if self._event == "render":
                    parts = json.loads("\n".join(self._data))
                    self.events.append(parts)
                    self.parts.update(parts)
                    self._changed.set()
                    self._changed = anyio.Event()
                self._event, self._data = "", []

    async def until(self, what: str, predicate: Callable[[dict[str, str]], bool]) -> dict[str, str]:
        """The parts once ``predicate`` accepts them (bounded by WAIT)."""
        with anyio.move_on_after(WAIT):
            while not predicate(self.parts):
                await self._changed.wait()
            return self.parts
        raise AssertionError(f"the stream did not show {what} within {WAIT} s: {json.dumps(self.parts)[:3000]}")


@asynccontextmanager
async def _unwrapped() -> AsyncIterator[None]:
    """A task group's single failure raised as itself (an assertion reads plainly)."""
    try:
        yield
    except BaseExceptionGroup as group:
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from None
        raise


@asynccontextmanager
async def served(runtime: Runtime, *, approval_seconds: float = 120.0, enter: bool = True) -> AsyncIterator[Page]:
    """``kxen_settings_web.serve(runtime, port=0, open_browser=False)`` for the block (it enters
    the runtime), and a client that came in through the URL it announced."""
    from kxen_settings_web import serve

    urls: list[str] = []
    async with _unwrapped(), anyio.create_task_group() as tg:
        run = partial(
            serve, runtime, port=0, open_browser=False, announce=urls.append, approval_seconds=approval_seconds
        )
        tg.start_soon(run)
        with anyio.fail_after(WAIT):
            while not urls:
                await anyio.sleep(0.02)
        page = Page(urls[0])
        try:
            if enter:
                await page.enter()
            yield page
        finally:
            await page.client.aclose()
            tg.cancel_scope.cancel()


# --- kxen settings, the command ---------------------------------------------------------------


class Command:
    """A ``kxen settings --no-open`` process: its ``url`` (printed), its ``out`` and ``err`` so far."""

    def __init__(self, proc: Any) -> None:
        self.proc = proc
        self.out = ""
        self.err = ""
        self.url = ""
        self.code: int | None = None
        self.drained = 0
        self._changed = anyio.Event()

    async def _drain(self, stream: Any, which: str) -> None:
        async for chunk in stream:
            setattr(self, which, getattr(self, which) + chunk.decode(errors="replace"))
            self._wake()
        self.drained += 1
        self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    async def stop(self) -> int:
        """Ctrl-C, as a person would; the exit code (killed if it takes longer than WAIT)."""
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGINT)
            with anyio.move_on_after(WAIT):
                await self.proc.wait()
            if self.proc.returncode is None:
                self.proc.kill()
                await self.proc.wait()
        self.code = self.proc.returncode
        return self.code


@asynccontextmanager
async def settings_command(home: Path, ws: Path, *flags: str, plugins: str) -> AsyncIterator[Command]:
    """``kxen --home H --workspace W FLAGS settings --no-open`` with the entry points ``plugins``
    (and this environment: its ``KXEN_DATA_DIR``), until the block ends (then Ctrl-C)."""
    argv = [sys.executable, "-m", "kxen_core.cli", "--home", str(home), "--workspace", str(ws), *flags]
    env = {**os.environ, "KXEN_LOAD_PLUGINS": plugins}
    env.pop("KXEN_DISABLE_PLUGINS", None)
    proc = await anyio.open_process([*argv, "settings", "--no-open"], stdin=subprocess.DEVNULL, env=env)
    async with proc, _unwrapped(), anyio.create_task_group() as tg:
        command = Command(proc)
        tg.start_soon(command._drain, proc.stdout, "out")
        tg.start_soon(command._drain, proc.stderr, "err")
        try:
            with anyio.move_on_after(WAIT):
                while not (found := re.search(r"kxen settings: (http://\S+)", command.out)):
                    if proc.returncode is not None:
                        break
                    await command._changed.wait()
            if not found:
                raise AssertionError(f"kxen settings printed no URL: {command.out!r} {command.err[-3000:]!r}")
            command.url = found.group(1)
            yield command
        finally:
            await command.stop()
            with anyio.move_on_after(5):  # the rest of its output (a child holding the pipe: not waited for)
                while command.drained < 2:
                    await command._changed.wait()
            tg.cancel_scope.cancel()


@asynccontextmanager
async def visit(url: str) -> AsyncIterator[Page]:
    """A client that came in through ``url`` (a page served by another process)."""
    page = Page(url)
    try:
        await page.enter()
        yield page
    finally:
        await page.client.aclose()


# --- raw HTTP/1.1 ------------------------------------------------------------------------------


class Raw:
    """An answer read off the socket: ``status``, ``headers`` (lower-case names, in order), ``body``."""

    def __init__(self, head: bytes, body: bytes) -> None:
        lines = head.decode("latin-1").split("\r\n")
        self.status = int(lines[0].split(" ")[1])
        self.headers = [(k.strip().lower(), v.strip()) for k, _, v in (line.partition(":") for line in lines[1:])]
        self.body = body

    def header(self, name: str) -> str | None:
        values = [v for k, v in self.headers if k == name]
        return values[0] if values else None

    def json(self) -> Any:
        return json.loads(self.body)

    def __repr__(self) -> str:
        return f"<Raw {self.status} {self.body[:300]!r}>"


def request(
    method: str, path: str, headers: Iterable[tuple[str, str]], body: bytes = b"", *, version: str = "1.1"
) -> bytes:
    """One request's bytes, written as given (no header added, none fixed)."""
    head = f"{method} {path} HTTP/{version}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers) + "\r\n"
    return head.encode("latin-1") + body


async def raw(port: int, data: bytes, *, then: Callable[[Any], Any] | None = None, seconds: float = WAIT) -> Raw:
    """Send ``data`` on a new connection to 127.0.0.1:``port`` (then run ``then(stream)``: send more
    in the background) and read one answer (bounded by ``seconds``)."""
    async with await anyio.connect_tcp("127.0.0.1", port) as conn, anyio.create_task_group() as tg:
        await conn.send(data)
        if then is not None:
            tg.start_soon(_quietly, then, conn)
        buf = b""
        with anyio.fail_after(seconds):
            while b"\r\n\r\n" not in buf:
                buf += await _receive(conn)
            head, _, body = buf.partition(b"\r\n\r\n")
            answer = Raw(head, b"")
            length = answer.header("content-length")
            if length is not None:
                while len(body) < int(length):
                    body += await _receive(conn)
                body = body[: int(length)]
            else:  # no length: the server closes after the body (an h11-level refusal)
                try:
                    while True:
                        body += await conn.receive()
                except (anyio.EndOfStream, anyio.BrokenResourceError):
                    pass
        tg.cancel_scope.cancel()
    answer.body = body
    return answer


async def _quietly(then: Callable[[Any], Any], conn: Any) -> None:
    try:
        await then(conn)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        pass  # the server answered and closed while more was being sent


async def _receive(conn: Any) -> bytes:
    try:
        return await conn.receive()
    except anyio.EndOfStream:
        raise AssertionError("the connection closed before a whole answer came") from None


# --- nothing changed ---------------------------------------------------------------------------


def file_bytes(paths: Iterable[Path]) -> dict[str, bytes | None]:
    return {str(p): (p.read_bytes() if p.exists() else None) for p in paths}


async def state(rt: Runtime, files: Iterable[Path]) -> dict[str, Any]:
    """What a refused request must leave as it was: the config files byte for byte, and the
    runtime -- its event count (every change is numbered), the config object in force (a reload
    replaces it), each server's state and process, the approvals waiting, the remote switch, the
    config problems and the sign-ins."""
    snap = await rt.settings_snapshot(wait=0)
    return {
        "files": file_bytes(files),
        "seq": snap["seq"],
        "config": id(rt.config),
        "servers": {
            s["name"]: (s["state"], (s.get("transportInfo") or {}).get("pid"), s["error"]) for s in snap["servers"]
        },
        "pending": [(a["id"], a["kind"], a["server"]) for a in snap["approvals"]["pending"]],
        "remote": (snap["remote"]["enabled"], [(r["name"], r["acknowledged"]) for r in snap["remote"]["servers"]]),
        "problems": snap["problems"],
        "logins": snap["logins"],
    }


def states(snap: dict[str, Any]) -> dict[str, str]:
    """Each server's state in a snapshot."""
    return {s["name"]: s["state"] for s in snap.get("servers", [])}


def pid_of(snap: dict[str, Any], name: str) -> int | None:
    """The process of a stdio server in a snapshot (None while it has none)."""
    entry = next((s for s in snap.get("servers", []) if s["name"] == name), None)
    return ((entry or {}).get("transportInfo") or {}).get("pid")


def acknowledge(home: Path, runtime: Runtime, *, enable: bool | None = True) -> list[str]:
    """Confirm every remote server of ``runtime``'s config (and turn remote on), as the page would."""
    keys = [r["key"] for r in runtime.remote_servers()]
    acknowledge_remote(home, keys, enable=enable)
    return keys


__all__ = [
    "Command",
    "DEMO",
    "OAUTH_PLUGINS",
    "REMOTE_OFF",
    "REMOTE_ON",
    "WAIT",
    "Page",
    "Raw",
    "Request",
    "Response",
    "Stream",
    "acknowledge",
    "auth_peer",
    "demo_entry",
    "file_bytes",
    "local_http",
    "pid_of",
    "raw",
    "remote",
    "request",
    "served",
    "settings_command",
    "visit",
    "state",
    "states",
    "stored",
    "write_project",
]
