"""The sign-in's loopback listener under requests that are not its answer: a flood of wrong
``state``, other paths and garbage is answered and ignored, never ends the sign-in; only the right
``state`` completes it, and the caller's time bound still ends a wait that never gets it. (The
twin against the OAuth peer: tests/test_oauth_flow.py::test_a_flood_at_the_listener_does_not_end_the_sign_in.)"""

from __future__ import annotations

import socket

import anyio
import pytest
from kxen_oauth._listener import MAX_OPEN, Listener

pytestmark = pytest.mark.anyio

STATE = "the-right-state"


async def request(port: int, raw: bytes) -> bytes:
    """Send one raw request to 127.0.0.1:``port``; the answer's bytes (bounded)."""
    async with await anyio.connect_tcp("127.0.0.1", port) as stream:
        await stream.send(raw)
        answer = b""
        with anyio.move_on_after(10):
            while len(answer) < 65536:
                try:
                    answer += await stream.receive(4096)
                except (anyio.EndOfStream, anyio.BrokenResourceError):
                    break
        return answer


def get(target: str) -> bytes:
    return f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()


async def test_a_flood_of_wrong_requests_is_answered_and_ignored_then_the_right_state_completes():
    listener = await Listener.bind()
    got: list[dict[str, str]] = []
    wrong = [
        get("/callback?state=forged&code=evil"),
        get("/callback?code=no-state"),
        get("/elsewhere?state=" + STATE),
        b"NONSENSE\r\n\r\n",
    ]
    try:
        with anyio.fail_after(120):
            async with anyio.create_task_group() as tg:

                async def wait() -> None:
                    got.append(await listener.wait(STATE))

                tg.start_soon(wait)
                for i in range(300):  # more than the 200 that used to end the sign-in
                    answer = await request(listener.port, wrong[i % len(wrong)])
                    assert answer.split(b"\r\n", 1)[0] in (b"HTTP/1.1 400 Bad Request", b"HTTP/1.1 404 Not Found")
                    assert not got, "a wrong request completed the sign-in"
                answer = await request(listener.port, get(f"/callback?state={STATE}&code=the-code"))
                assert answer.startswith(b"HTTP/1.1 200 OK")
    finally:
        await listener.aclose()
    assert got == [{"state": STATE, "code": "the-code"}]


async def test_idle_connections_do_not_keep_the_answer_from_being_read(monkeypatch):
    import kxen_oauth._listener as module

    monkeypatch.setattr(module, "READ_SECONDS", 3600.0)  # an idle connection would hold a serial reader for good
    listener = await Listener.bind()
    got: list[dict[str, str]] = []
    idle = []
    try:
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:

                async def wait() -> None:
                    got.append(await listener.wait(STATE))

                tg.start_soon(wait)
                for _ in range(MAX_OPEN - 1):  # connect and say nothing
                    idle.append(await anyio.connect_tcp("127.0.0.1", listener.port))
                answer = await request(listener.port, get(f"/callback?state={STATE}&code=c"))
                assert answer.startswith(b"HTTP/1.1 200 OK")
    finally:
        for stream in idle:
            await stream.aclose()
        await listener.aclose()
    assert got == [{"state": STATE, "code": "c"}]


async def test_more_open_connections_than_the_bound_are_told_503_and_the_flow_goes_on(monkeypatch):
    import kxen_oauth._listener as module

    monkeypatch.setattr(module, "READ_SECONDS", 3600.0)
    listener = await Listener.bind()
    got: list[dict[str, str]] = []
    idle = []
    try:
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:

                async def wait() -> None:
                    got.append(await listener.wait(STATE))

                tg.start_soon(wait)
                for _ in range(MAX_OPEN):
                    idle.append(await anyio.connect_tcp("127.0.0.1", listener.port))
                answer = await request(listener.port, get(f"/callback?state={STATE}&code=c"))
                assert answer.startswith(b"HTTP/1.1 503 Service Unavailable") and not got
                await idle.pop().aclose()  # one reader is free again
                for _ in range(200):  # bounded: the freed reader is seen within a few turns of the loop
                    answer = await request(listener.port, get(f"/callback?state={STATE}&code=c"))
                    if not answer.startswith(b"HTTP/1.1 503"):
                        break
                    await anyio.sleep(0.05)
                assert answer.startswith(b"HTTP/1.1 200 OK")
    finally:
        for stream in idle:
            await stream.aclose()
        await listener.aclose()
    assert got == [{"state": STATE, "code": "c"}]


async def test_the_callers_time_bound_still_ends_a_wait_that_never_gets_its_answer():
    listener = await Listener.bind()
    try:
        with pytest.raises(TimeoutError):
            with anyio.fail_after(1):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(listener.wait, STATE)
                    for _ in range(1000):
                        await request(listener.port, get("/callback?state=wrong"))
    finally:
        await listener.aclose()


def _answer_then_preconnect(port: int, spares: int) -> list[socket.socket]:
    """From a thread, as a browser does: the answer on one connection and, right behind it,
    ``spares`` connections that send nothing (Chromium's preconnects); the sockets, to close."""
    first = socket.create_connection(("127.0.0.1", port), timeout=10)
    first.sendall(get(f"/callback?state={STATE}&code=c"))
    return [first, *(socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(spares))]


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_spare_connections_arriving_as_the_answer_ends_the_wait_leave_nothing_open():
    """The wait ends in the loop turn a spare connection comes (the race behind CPython 3.11's
    cancelled ``sock_accept`` setting its result: InvalidStateError in the loop, the accepted socket
    leaked, seen in the browser sign-in test). Every round must end cleanly, with nothing left open:
    the per-test garbage collection turns a leaked socket into an error."""
    for _ in range(40):
        listener = await Listener.bind()
        try:
            with anyio.fail_after(20):
                async with anyio.create_task_group() as tg:
                    result: dict[str, dict[str, str]] = {}

                    async def wait(into: dict[str, dict[str, str]] = result, on: Listener = listener) -> None:
                        into["got"] = await on.wait(STATE)

                    tg.start_soon(wait)
                    sockets = await anyio.to_thread.run_sync(_answer_then_preconnect, listener.port, 3)
            assert result["got"] == {"state": STATE, "code": "c"}
        finally:
            await listener.aclose()
        for s in sockets:
            s.close()
