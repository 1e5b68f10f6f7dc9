"""One start, one budget (:func:`kxen_core.protocol.era.open_session`): the era probe
(``server/discover``) and ``initialize`` of a server that never answers end together when
``timeouts.initializeSeconds`` runs out -- not after the probe's wait and then initialize's whole
timeout -- and the error names that budget.

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
from kxen_core.protocol.session import Session

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> Any:
    """trio with a virtual clock that jumps to the next deadline whenever every task waits."""
    return ("trio", {"clock": MockClock(autojump_threshold=0)})


def _server(budget: float, *, remote: bool = False) -> ServerConfig:
    where: dict[str, Any] = {"url": "http://127.0.0.1:9/mcp"} if remote else {"command": "silent-server"}
    return ServerConfig(name="hung", timeouts=Timeouts(initializeSeconds=budget), **where)


def _sent(peer: Any) -> list[str]:
    out = []
    while True:
        try:
            out.append(peer.c2s_recv.receive_nowait().get("method"))
        except anyio.WouldBlock:
            return out


@pytest.mark.parametrize("budget", [0.5, 5.0, 60.0, 600.0])
@pytest.mark.parametrize("remote", [False, True], ids=["local", "remote"])
async def test_a_hung_server_is_given_up_after_its_one_budget(peer, budget, remote):
    server = _server(budget, remote=remote)
    async with Session(peer.stream, server="hung", initialize_timeout=budget) as session:
        began = anyio.current_time()
        with pytest.raises(StartTimeout) as caught:
            await open_session(session, server, EraMemory())
        elapsed = anyio.current_time() - began
    assert elapsed == pytest.approx(budget)  # not the probe's wait plus initialize's whole timeout
    assert caught.value.seconds == budget
    assert str(caught.value) == (
        f"server/discover, then initialize: no reply from server 'hung' within {budget:g} s "
        "(the start's one budget, timeouts.initializeSeconds)"
    )
    sent = _sent(peer)
    assert sent[0] == "server/discover"
    # a local server's probe has at most DISCOVER_SECONDS and half the budget: initialize gets the
    # rest; a remote one's probe may take it all, and then nothing is left to send initialize with
    assert sent[1:] == ([] if remote else ["initialize"])


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
