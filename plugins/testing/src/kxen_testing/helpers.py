"""Plain helpers for tests that drive a real :class:`kxen_core.Runtime` (no pytest needed here).

* :func:`mem` -- an ``mcp.json`` server entry for the in-memory transport, talking to a fake server
  registered with :func:`kxen_testing.register_fake` (or the ``fakes`` fixture).
* :func:`running` -- an async context manager: start a Runtime and wait until every server has
  settled (ready, failed, disabled, awaiting approval...), bounded by ``wait`` seconds.
* :class:`Channel` -- a scriptable approval channel plugin: it records every
  :class:`~kxen_core.policy.ApprovalRequest` it is shown and answers yes, no, or passes.
* :class:`Answers` -- a scriptable plugin answering servers' sampling and elicitation requests.
* :func:`returned_by_receive` -- what a transport's stream hands out through ``receive`` (for a
  transport that pushes its messages to the session, nothing but the end).

A typical test (with the fixtures of ``kxen_testing.pytest_plugin``)::

    import pytest
    from kxen_testing import Channel, mem, running, text_result

    pytestmark = pytest.mark.anyio

    async def test_ask_goes_to_the_channel(kxen_home, fakes, tmp_path):
        fakes.add("f", tools={"echo": lambda args: text_result(args["text"])})
        channel = Channel(approved=True)
        servers = {"s": mem("f", toolPolicies={"echo": "ask"})}
        async with running(kxen_home, tmp_path, channel, servers=servers) as rt:
            assert await rt.call_tool("s__echo", {"text": "hi"}) == text_result("hi")
        assert [r.kind for r in channel.requests] == ["tool_call"]

Only kxen's public API is used: ``Runtime``, ``hookimpl``, ``make_plugin_manager`` and the
``kxen_core.policy`` value types.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kxen_core import hookimpl
from kxen_core.policy import ApprovalDecision, ApprovalRequest

if TYPE_CHECKING:
    from kxen_core import Runtime

#: how long :func:`running` waits, by default, for every server to settle
READY_SECONDS = 20.0
#: the entry points :func:`running` loads by default: only kxen-testing's in-memory transport
MEMORY_ONLY = ("memory",)
_UNSET: Any = object()


def mem(fake: str, **extra: Any) -> dict[str, Any]:
    """A server entry for the in-memory transport, talking to the registered fake ``fake``.

    ``extra`` is merged into the entry, e.g. ``mem("f", defaultToolPolicy="allow")`` or
    ``mem("f", enabled=False, toolPolicies={"rm": "deny"})``.
    """
    return {"transport": "memory", "options": {"server": fake}, **extra}


@asynccontextmanager
async def running(
    home: Any,
    workspace: Path | str,
    *plugins: Any,
    servers: Mapping[str, Any] | None = None,
    pm: Any = None,
    allow: Iterable[str] | None = MEMORY_ONLY,
    wait: float = READY_SECONDS,
    **runtime_kwargs: Any,
) -> AsyncIterator[Runtime]:
    """Start a :class:`~kxen_core.Runtime` and yield it once every server has settled.

    ``home`` is the ``kxen_home`` fixture (or a path to a kxen home); with ``servers``, that dict
    is first written to its ``mcp.json`` (``home`` must then be the fixture). ``workspace`` is the
    workspace directory.

    The plugin manager is ``pm`` if given; otherwise a fresh one from
    ``make_plugin_manager(allow=allow, extra=plugins)``: the core defaults, the installed entry
    points named in ``allow``, and the plugin objects ``plugins`` (an approval :class:`Channel`, a
    policy voter, the plugin under test...). ``allow`` defaults to only the ``memory`` transport, so
    other installed plugins cannot change a test's result; name your own entry points to load them
    as installed, or pass ``allow=None`` to load every installed plugin like the ``kxen`` command
    does (``KXEN_LOAD_PLUGINS``/``KXEN_DISABLE_PLUGINS`` still apply then).

    ``runtime_kwargs`` go to ``Runtime`` as they are (``role=``, ``only=``, ``approve=``...).
    Settling is bounded by ``wait`` seconds (``TimeoutError`` when it takes longer). After the block,
    ``rt.close_seconds`` holds how long closing the runtime took.
    """
    from kxen_core import Runtime
    from kxen_core.plugins import make_plugin_manager

    if pm is not None and plugins:
        raise TypeError("running(): pass the plugins either in pm= or as extra arguments, not both")
    if any(isinstance(plugin, Mapping) for plugin in plugins):
        raise TypeError("running(): a dict is no plugin; pass the servers as servers=")
    if servers is not None:
        home.write_servers(dict(servers))
    if pm is None:
        pm = make_plugin_manager(allow=None if allow is None else list(allow), extra=list(plugins))
    rt = Runtime(home=getattr(home, "path", home), workspace=workspace, pm=pm, **runtime_kwargs)
    async with rt:
        if not await rt.wait_ready(wait):
            raise TimeoutError(f"the servers did not settle within {wait} s: {rt.status()}")
        yield rt
        closing = time.monotonic()
    rt.close_seconds = time.monotonic() - closing  # type: ignore[attr-defined]


class Channel:
    """An approval channel plugin that records every request and answers ``approved``.

    ``approved`` is True (yes), False (no) or None (pass: the next channel is asked; none left
    means no). ``name`` is its plugin name and the ``channel`` of its decisions; give each channel
    in one plugin manager its own name. ``reason`` is the reason of its decisions (kxen shows a no
    without a reason as "declined").

    Register it like any plugin: ``running(home, ws, Channel(approved=False))`` or
    ``make_plugin_manager(extra=[channel])``. Extra plugins are registered last, so they are asked
    before installed channels; when it passes, an installed channel (e.g. the terminal one) that is
    loaded is asked next, so load only the entry points you need (``allow=``).
    """

    def __init__(self, approved: bool | None = True, name: str = "test-channel", *, reason: str = "") -> None:
        self.approved = approved
        self.reason = reason
        #: every request this channel was shown, in order
        self.requests: list[ApprovalRequest] = []
        self.__name__ = name

    @hookimpl
    async def kxen_approval_prompt(self, request: ApprovalRequest) -> ApprovalDecision | None:
        self.requests.append(request)
        if self.approved is None:
            return None
        return ApprovalDecision(approved=self.approved, reason=self.reason, channel=self.__name__)

    def __repr__(self) -> str:
        return f"Channel(approved={self.approved!r}, name={self.__name__!r})"


class Answers:
    """A plugin that answers servers' ``sampling/createMessage`` (``sampling=``) and/or
    ``elicitation/create`` (``elicitation=``) and records every request it is shown.

    Each answer is a dict (the result), ``None`` (pass: the request is declined), or a function of
    the request returning either. Only the hooks given are implemented, so kxen declares only
    those capabilities: ``Answers(elicitation={"action": "accept", "content": {"ok": True}})``
    declares ``elicitation`` and not ``sampling``.
    """

    def __init__(self, *, sampling: Any = _UNSET, elicitation: Any = _UNSET, name: str = "test-answers") -> None:
        self.requests: list[Any] = []
        self.__name__ = name
        if sampling is not _UNSET:
            self.kxen_sampling_request = self._hook(sampling)
        if elicitation is not _UNSET:
            self.kxen_elicitation_request = self._hook(elicitation)

    def _hook(self, answer: Any) -> Any:
        @hookimpl
        async def impl(server: Any, request: Any) -> Any:
            self.requests.append(request)
            return answer(request) if callable(answer) else answer

        return impl

    def __repr__(self) -> str:
        return f"Answers(name={self.__name__!r})"


def returned_by_receive(stream: Any) -> list[Any]:
    """Wrap the ``receive`` of ``stream`` (a :class:`kxen_core.MessageStream`) so that every message
    it returns is also appended to the list returned here. A stream that pushes each message to the
    session as it arrives (``set_receiver``) leaves the list empty: its ``receive`` only ends."""
    returned: list[Any] = []
    receive = stream.receive

    async def recording() -> Any:
        message = await receive()
        returned.append(message)
        return message

    stream.receive = recording
    return returned
