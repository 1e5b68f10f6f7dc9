"""A start's budgets (:func:`kxen_core.protocol.era.open_session`): the era probe
(``server/discover``) and ``initialize`` of a server that never answers end together when its
budget runs out -- ``timeouts.initializeSeconds`` for a remote server, ``timeouts.startupSeconds``
for a local one that never said anything -- not after the probe's wait and then initialize's whole
timeout, and the error names that budget. A local server that answered has ``initializeSeconds``
from its first answer.

Time here is trio's virtual clock (``MockClock`` with autojump): every wait ends exactly at its
deadline and nothing sleeps, so the elapsed time below is exact, not a measurement of this machine.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from session_support import init_result
from trio.testing import MockClock

from kxen_core.config.models import ServerConfig, Timeouts
from kxen_core.errors import StartTimeout
from kxen_core.protocol.era import DISCOVER_SECONDS, EraMemory, open_session
from kxen_core.protocol.era_requests import LATEST_MODERN_VERSION
from kxen_core.protocol.session import Session

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> Any:
    """trio with a virtual clock that jumps to the next deadline whenever every task waits."""
    return ("trio", {"clock": MockClock(autojump_threshold=0)})


def _server(budget: float, *, remote: bool = False, startup: float | None = None) -> ServerConfig:
    where: dict[str, Any] = {"url": "http://127.0.0.1:9/mcp"} if remote else {"command": "silent-server"}
    timeouts = Timeouts(initializeSeconds=budget, startupSeconds=budget if startup is None else startup)
    return ServerConfig(name="hung", timeouts=timeouts, **where)


def _sent(peer: Any) -> list[str]:
    out = []
    while True:
        try:
            out.append(peer.c2s_recv.receive_nowait().get("method"))
        except anyio.WouldBlock:
            return out


@pytest.mark.parametrize("budget", [0.5, 5.0, 60.0, 600.0])
async def test_a_hung_remote_server_is_given_up_after_its_one_budget(peer, budget):
    server = _server(budget, remote=True)
    async with Session(peer.stream, server="hung", initialize_timeout=budget) as session:
        began = anyio.current_time()
        with pytest.raises(StartTimeout) as caught:
            await open_session(session, server, EraMemory())
        elapsed = anyio.current_time() - began
    assert elapsed == pytest.approx(budget)  # not the probe's wait plus initialize's whole timeout
    assert (caught.value.seconds, caught.value.budget) == (budget, "initializeSeconds")
    assert str(caught.value) == (
        f"server/discover, then initialize: no reply from server 'hung' within {budget:g} s "
        "(the start's one budget, timeouts.initializeSeconds)"
    )
    # a remote server's probe may take the whole budget: nothing is left to send initialize with
    assert _sent(peer) == ["server/discover"]


@pytest.mark.parametrize(("startup", "budget"), [(0.5, 60.0), (5.0, 5.0), (120.0, 60.0), (600.0, 30.0), (20.0, 60.0)])
async def test_a_silent_local_server_is_given_up_after_its_startup_budget(peer, startup, budget):
    """Nothing at all from a local server: it may still be installing, so the start waits
    ``startupSeconds`` from the spawn -- longer or shorter than ``initializeSeconds`` -- and says so."""
    server = _server(budget, startup=startup)
    async with Session(peer.stream, server="hung", initialize_timeout=budget) as session:
        began = anyio.current_time()
        with pytest.raises(StartTimeout) as caught:
            await open_session(session, server, EraMemory())
        elapsed = anyio.current_time() - began
    assert elapsed == pytest.approx(startup)
    assert (caught.value.seconds, caught.value.budget) == (startup, "startupSeconds")
    assert str(caught.value) == (
        f"server/discover, then initialize: no reply from server 'hung' within {startup:g} s of its start "
        "(timeouts.startupSeconds: it never answered; a first install counts)"
    )
    # the probe has at most DISCOVER_SECONDS and half of each budget: initialize gets the rest
    assert _sent(peer) == ["server/discover", "initialize"]


async def test_a_first_install_that_outlasts_initialize_seconds_still_starts(peer):
    """A package runner's first install: nothing for 100 s (past initializeSeconds, within
    startupSeconds), then the server reads what waited in its pipe and answers both."""
    server = _server(60.0, startup=120.0)

    async def install_then_answer() -> None:
        probe = await peer.next(timeout=200)
        init = await peer.next(timeout=200)
        assert (probe["method"], init["method"]) == ("server/discover", "initialize")
        await anyio.sleep(100 - (anyio.current_time() - began))
        await peer.s2c_send.send({"jsonrpc": "2.0", "id": probe["id"], "error": {"code": -32601, "message": "no"}})
        await peer.s2c_send.send({"jsonrpc": "2.0", "id": init["id"], "result": init_result()})

    async with Session(peer.stream, server="hung", initialize_timeout=60.0) as session:
        began = anyio.current_time()
        async with anyio.create_task_group() as tg:
            tg.start_soon(install_then_answer)
            init = await open_session(session, server, EraMemory())
        assert anyio.current_time() - began == pytest.approx(100)
    assert init.protocol_version and session.modern is None


async def test_a_local_server_that_answered_has_initialize_seconds_from_that_answer(peer):
    """The probe answered (an error: the handshake era) after 3 s; then initialize hangs: the start
    ends ``initializeSeconds`` after that answer, naming that budget, not ``startupSeconds``."""
    server = _server(60.0, startup=120.0)

    async def refuse_probe_then_hang() -> None:
        probe = await peer.next(timeout=200)
        await anyio.sleep(3)
        await peer.s2c_send.send({"jsonrpc": "2.0", "id": probe["id"], "error": {"code": -32601, "message": "no"}})

    async with Session(peer.stream, server="hung", initialize_timeout=60.0) as session:
        began = anyio.current_time()
        async with anyio.create_task_group() as tg:
            tg.start_soon(refuse_probe_then_hang)
            with pytest.raises(StartTimeout) as caught:
                await open_session(session, server, EraMemory())
        elapsed = anyio.current_time() - began
    assert elapsed == pytest.approx(63)
    assert (caught.value.seconds, caught.value.budget) == (60.0, "initializeSeconds")


async def test_a_late_stateless_server_gets_its_one_more_probe(peer):
    """A stateless-era server that comes up after 70 s: the probe gave up at 10 s, initialize went
    out, and its refusal (-32022, naming a modern version) is its first answer -- so the probe's one
    more try has initializeSeconds from it, and the server starts in its era."""
    server = _server(60.0, startup=120.0)

    async def come_up_late() -> None:
        probe = await peer.next(timeout=200)
        init = await peer.next(timeout=200)
        assert init["method"] == "initialize"
        await anyio.sleep(70 - (anyio.current_time() - began))
        await peer.s2c_send.send({"jsonrpc": "2.0", "id": probe["id"], "error": {"code": -32601, "message": "late"}})
        refusal = {"code": -32022, "message": "unsupported", "data": {"supported": [LATEST_MODERN_VERSION]}}
        await peer.s2c_send.send({"jsonrpc": "2.0", "id": init["id"], "error": refusal})
        again = await peer.next(timeout=200)
        assert again["method"] == "server/discover"
        result = {"supportedVersions": [LATEST_MODERN_VERSION], "capabilities": {"tools": {}}, "resultType": "complete"}
        await peer.s2c_send.send({"jsonrpc": "2.0", "id": again["id"], "result": result})

    async with Session(peer.stream, server="hung", initialize_timeout=60.0) as session:
        began = anyio.current_time()
        async with anyio.create_task_group() as tg:
            tg.start_soon(come_up_late)
            await open_session(session, server, EraMemory())
    assert session.modern is not None


async def test_the_probes_share_leaves_initialize_the_rest(peer):
    """A local server that ignores the probe and answers initialize late, but within the budget:
    it starts in the handshake era."""
    budget = 60.0
    server = _server(budget)

    async def answer_initialize_late() -> None:
        probe = await peer.next(timeout=budget)
        assert probe["method"] == "server/discover"
        init = await peer.next(timeout=budget)
        assert init["method"] == "initialize"
        assert anyio.current_time() - began == pytest.approx(DISCOVER_SECONDS)
        await anyio.sleep(budget - DISCOVER_SECONDS - 1)  # 1 s before the start's budget runs out
        await peer.s2c_send.send({"jsonrpc": "2.0", "id": init["id"], "result": init_result()})

    async with Session(peer.stream, server="hung", initialize_timeout=budget) as session:
        began = anyio.current_time()
        async with anyio.create_task_group() as tg:
            tg.start_soon(answer_initialize_late)
            init = await open_session(session, server, EraMemory())
        assert anyio.current_time() - began == pytest.approx(budget - 1)
    assert init.protocol_version and session.modern is None
