"""The stateless era's change stream (MCP 2026-07-28): one ``subscriptions/listen`` request per session.

A server of the handshake era sends ``list_changed`` and ``resources/updated`` whenever it likes; one
of the stateless era sends them only on a listen stream: a request whose answer never comes while
the stream is open. :class:`Listener` keeps one open per modern session:

* its filter asks for what the server offers and kxen uses: ``toolsListChanged``,
  ``promptsListChanged``, ``resourcesListChanged`` (each behind that kind's ``listChanged``) and
  ``resourceSubscriptions`` (the URIs the host subscribed to, behind ``resources.subscribe``); with
  nothing to ask for no stream is opened;
* the first message is ``notifications/subscriptions/acknowledged`` with the subset granted (what it
  leaves out is left to the ``ttlMs`` caching hints); every later one carries
  ``_meta["io.modelcontextprotocol/subscriptionId"]`` equal to the listen request's id, and one
  that does not -- a stale stream's, or none at all -- is ignored and counted (:meth:`Listener.owns`);
* the server may end the stream with a result or ``notifications/cancelled``; a proxy may cut it
  (the request fails) and a server may never acknowledge it (:data:`ACK_SECONDS`): then it is opened
  again after a jittered, doubling delay (:data:`FIRST_DELAY` .. :data:`MAX_DELAY`), and once it is
  acknowledged again every granted catalog is fetched once (changes may have been missed while it was
  down) and every subscribed URI is told it was updated;
* at most :data:`MAX_REOPENS` reopens in :data:`WINDOW_SECONDS`: past that, or at once when the
  server answers the request with an error (it does not serve it), the listener gives up for the
  session and the catalogs follow their ``ttlMs`` hints alone (``on_fallback`` says why);
* a changed set of subscribed URIs (:meth:`Listener.refilter`) reopens it with the new filter (not
  counted: the host asked);
* the stream is closed when its session closes (``notifications/cancelled`` on stdio; on HTTP that
  also closes the answer stream, which is the cancellation there).
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal

import anyio
import anyio.abc

from kxen_core.errors import ClosedError, KxenError, RemoteError, RequestTimeout

if TYPE_CHECKING:
    from kxen_core.protocol.session import Session

METHOD = "subscriptions/listen"
ACKNOWLEDGED = "notifications/subscriptions/acknowledged"
META_SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
#: the filter's flag for each catalog kind whose ``listChanged`` the server declares
FLAGS = {"tools": "toolsListChanged", "prompts": "promptsListChanged", "resources": "resourcesListChanged"}
#: a stream not acknowledged this long after it was opened is cut (and counts as a reopen)
ACK_SECONDS = 10.0
#: the longest one listen request waits; then it is opened again (a bound, not a failure)
STREAM_SECONDS = 3600.0
#: the delay before a reopen: the first, doubled each time to the last, each drawn in [d/2, d]
FIRST_DELAY = 0.25
MAX_DELAY = 5.0
#: a stream acknowledged and open this long resets the delay to the first
STABLE_SECONDS = 30.0
#: at most this many reopens in this many seconds; then the caching hints alone
MAX_REOPENS = 4
WINDOW_SECONDS = 60.0
#: a burst of subscription changes within this long reopens the stream once
REFILTER_DEBOUNCE = 0.05

State = Literal["off", "opening", "open", "waiting", "fallback", "closed"]


def listen_filter(capabilities: Mapping[str, Any], uris: Iterable[str]) -> dict[str, Any]:
    """What to ask for: the list changes the server declares, and ``uris`` when it offers subscriptions."""
    notes: dict[str, Any] = {}
    for kind, flag in FLAGS.items():
        value = capabilities.get(kind)
        if isinstance(value, dict) and value.get("listChanged") is True:
            notes[flag] = True
    resources = capabilities.get("resources")
    wanted = sorted(set(uris))
    if wanted and isinstance(resources, dict) and resources.get("subscribe") is True:
        notes["resourceSubscriptions"] = wanted
    return notes


class Listener:
    """The listen stream of one modern session. ``run`` it in the session's task group once ready.

    ``uris`` gives the subscribed URIs; ``refresh`` is called with the granted catalog kinds (and the
    subscribed URIs) after a reopen; ``on_fallback`` when it gives up (the reason)."""

    def __init__(
        self,
        session: Session,
        capabilities: Mapping[str, Any],
        *,
        uris: Callable[[], Iterable[str]] = tuple,
        refresh: Callable[[list[str], list[str]], None] = lambda kinds, uris: None,
        on_fallback: Callable[[str], None] = lambda why: None,
        diag: Callable[[str], None] = lambda text: None,
    ) -> None:
        self.session = session
        self.capabilities = dict(capabilities)
        self.uris = uris
        self.refresh = refresh
        self.on_fallback = on_fallback
        self.diag = diag
        self.state: State = "off"
        self.rid: int | None = None  # the open stream's request id (its subscription id)
        self.granted: dict[str, Any] = {}
        self.opened = 0  # listen requests sent over the session's life
        self.ignored = 0  # change notifications without the open stream's subscription id
        self.why: str | None = None  # why it fell back
        self._acked = anyio.Event()
        self._cut: anyio.CancelScope | None = None
        self._refilter = False
        self._wake = anyio.Event()
        self._started: anyio.abc.TaskStatus[None] | None = None

    # --- what the session's reader hands over (O(1), never waits) ----------------------------------

    def covers(self, kind: str) -> bool:
        """Whether ``kind``'s changes arrive on the open stream (its ``ttlMs`` timer is then not needed)."""
        if self.state != "open":
            return False
        flag = FLAGS.get("resources" if kind == "resourceTemplates" else kind)
        return flag is not None and self.granted.get(flag) is True

    def owns(self, params: Any) -> bool:
        """Whether a change notification came on the open stream (its subscription id is the stream's)."""
        meta = params.get("_meta") if type(params) is dict else None
        sid = meta.get(META_SUBSCRIPTION_ID) if type(meta) is dict else None
        if self.rid is not None and type(sid) is int and sid == self.rid:
            return True
        self.ignored += 1
        if self.ignored & (self.ignored - 1) == 0:  # the 1st, 2nd, 4th, ...: a flood costs no log
            self.diag(f"{METHOD}: ignored {self.ignored} change notification(s) not of the open stream")
        return False

    def acknowledged(self, params: Any) -> None:
        if not self.owns(params) or self._acked.is_set():
            return
        granted = params.get("notifications")
        self.granted = dict(granted) if type(granted) is dict else {}
        self._acked.set()

    def cancelled(self, params: Any) -> bool:
        """``notifications/cancelled`` from the server: True when it ended the open stream."""
        target = params.get("requestId") if type(params) is dict else None
        if self.rid is None or type(target) is not int or target != self.rid:
            return False
        self.session.abandon(
            self.rid, ClosedError(f"{METHOD}: the server ended the stream", server=self.session.server)
        )
        return True

    def refilter(self) -> None:
        """The subscribed URIs changed: reopen with the new filter (soon, once for a burst)."""
        self._refilter = True
        if self._cut is not None:
            self._cut.cancel()
        elif self.state == "off":
            self._wake.set()

    # --- the stream ------------------------------------------------------------------------------

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Keep the stream open until the session closes or the reopens run out. Never raises (but
        cancellation): a bug here gives the stream up, never the connection. With ``tg.start`` it
        returns once the first request went out (what the server sends after it is on the stream)."""
        self._started = task_status
        try:
            await self._run()
        except Exception as exc:
            self._fall_back(f"it failed in kxen: {type(exc).__name__}: {str(exc)[:200]}")
        finally:
            self._start()

    def _start(self) -> None:
        started, self._started = self._started, None
        if started is not None:
            started.started()

    async def _run(self) -> None:
        opens: deque[float] = deque()
        delay = FIRST_DELAY
        reopen = False
        last = ""
        while not self.session.closed:
            self._refilter = False
            wanted = listen_filter(self.capabilities, self.uris())
            if not wanted:
                self.state = "off"
                self._start()
                self._wake = anyio.Event()
                await self._wake.wait()
                continue
            now = anyio.current_time()
            while opens and now - opens[0] > WINDOW_SECONDS:
                opens.popleft()
            if reopen and len(opens) > MAX_REOPENS:
                self._fall_back(f"it ended {len(opens)} times within {WINDOW_SECONDS:g} s (the last: {last})")
                return
            opens.append(now)
            why, stable = await self._one(wanted, reopen)
            if self.session.closed or why is None:
                return
            if self._refilter:  # the host asked: not a failure, not counted, nothing missed
                opens.pop()
                reopen = False
                await anyio.sleep(REFILTER_DEBOUNCE)
                continue
            last = why
            self.diag(f"{METHOD}: {why}; opening it again")
            delay = FIRST_DELAY if stable else delay
            self.state = "waiting"
            await anyio.sleep(random.uniform(delay / 2, delay))
            delay = min(delay * 2, MAX_DELAY)
            reopen = True

    async def _one(self, wanted: dict[str, Any], reopen: bool) -> tuple[str | None, bool]:
        """One listen request; (why it ended, or None to stop; whether it was stable first)."""
        session = self.session
        assert session.modern is not None
        self.state, self.granted, self.rid = "opening", {}, None
        self._acked = anyio.Event()
        try:
            params = session.modern.stamp({"notifications": wanted})
            begun = await session.begin_async(METHOD, params, ACK_SECONDS, on_id=self._sending)
        except KxenError as exc:  # closed, or the stream would not take it in time
            self.rid = None
            return f"it could not be sent: {type(exc).__name__}: {str(exc)[:200]}", False
        self._start()
        self.rid = begun[0]
        self.opened += 1
        since: float | None = None
        why: str | None = "the server ended the stream"
        async with anyio.create_task_group() as tg:
            with anyio.CancelScope() as cut:
                self._cut = cut
                if self._refilter:  # the URIs changed while it was being sent: this filter is stale
                    cut.cancel()

                async def watch() -> None:
                    nonlocal since
                    with anyio.move_on_after(ACK_SECONDS):
                        await self._acked.wait()
                    if not self._acked.is_set():
                        cut.cancel()
                        return
                    since = anyio.current_time()
                    self.state = "open"
                    if reopen:
                        kinds = [k for k, flag in FLAGS.items() if self.granted.get(flag) is True]
                        self.refresh(kinds, list(self.granted.get("resourceSubscriptions") or []))

                tg.start_soon(watch)
                try:
                    await session.finish(begun, STREAM_SECONDS)
                except RemoteError as err:  # it answered: it does not serve this (trying again gets the same)
                    self._fall_back(f"the server refused it: error {err.code}: {err.message[:120]}")
                    why = None
                except RequestTimeout:
                    why = f"the stream reached its longest wait ({STREAM_SECONDS:g} s)"
                except KxenError as exc:  # a cut stream, a bad answer, or the session's end
                    why = f"the stream ended: {type(exc).__name__}: {str(exc)[:200]}"
                tg.cancel_scope.cancel()
            self._cut = None
        if cut.cancelled_caught and not self._refilter:
            why = f"no acknowledgement within {ACK_SECONDS:g} s"
        self.rid = None
        if self.state != "fallback":
            self.state = "waiting"
        stable = since is not None and anyio.current_time() - since >= STABLE_SECONDS
        return why, stable

    def _sending(self, rid: int) -> None:
        self.rid = rid  # before it goes out: its acknowledgement may come before the send returns

    def _fall_back(self, why: str) -> None:
        self.state, self.why = "fallback", why
        self.on_fallback(why)

    def close(self) -> None:
        self.state = "closed"
        if self._cut is not None:
            self._cut.cancel()


__all__ = ["ACKNOWLEDGED", "FLAGS", "META_SUBSCRIPTION_ID", "METHOD", "Listener", "listen_filter"]
