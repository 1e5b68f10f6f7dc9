"""The Settings API's event stream: what changed in a runtime, in order, for a page or a host UI.

Every event is a dict with ``seq`` (1, 2, 3... for the runtime's life) and ``type``:

- ``server``: one server's status changed (``name``, ``server``: its :meth:`Runtime.status` entry);
- ``servers``: the set of servers changed (a load, a reload, a restart): ``names``;
- ``approvals``: the held approvals changed (``pending``: :meth:`Runtime.pending_approvals`);
- ``remote``: the remote switch or a confirmation was written (``enabled``);
- ``problems``: a reload was refused, or succeeded after one was (``problems``: :attr:`Runtime.problems`);
- ``login``: a sign-in started or ended (``login``: its :meth:`Runtime.logins` entry);
- ``pins``: a server's held or unaccepted tools changed (a listing, an acceptance, a reset):
  ``server``, ``held`` and ``unaccepted`` (tool names; :meth:`Runtime.held_tools` has the details);
- ``tools``: what the model is shown of a server changed (it became ready or stopped, it listed
  other tools, a filter, a deny or a pin hides others): ``server``. A host refreshes the model's
  tool list (:meth:`Runtime.tools`, the model formats) once per such event, instead of polling;
- ``overflow``: this subscriber did not read in time and missed events: ``missed`` (how many were
  dropped) and ``seq`` (the last one). The reader takes a fresh :meth:`Runtime.settings_snapshot`
  (whose ``seq`` says which events it already holds) and reads on.

Each subscriber has its own buffer of at most ``max_events`` events. When a publish finds it
full, the buffer is emptied and the subscriber marked: a reader that never reads costs at most
that buffer, and learns on its next read that it missed events (the ``overflow`` event, and the
gap in ``seq``). Publishing never waits for a reader.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator
from typing import Any

import anyio

from kxen_core.errors import InvalidArguments

#: the default buffer of one subscriber
DEFAULT_MAX_EVENTS = 256


class Subscription:
    """One reader of the stream: ``async for event in subscription`` (ends when closed)."""

    def __init__(self, hub: EventHub, max_events: int) -> None:
        self.hub = hub
        self.max_events = max_events
        self.buffer: deque[dict[str, Any]] = deque()
        self.missed = 0
        self.closed = False
        self._wake = anyio.Event()

    def _offer(self, event: dict[str, Any]) -> None:
        if len(self.buffer) >= self.max_events:
            self.missed += len(self.buffer) + 1  # what is dropped: the buffer and this event
            self.buffer.clear()
        else:
            self.buffer.append(event)
        self._wake.set()

    def take(self) -> dict[str, Any] | None:
        """The next event without waiting (the ``overflow`` first after a loss), or None."""
        if self.missed:
            missed, self.missed = self.missed, 0
            return {"seq": self.hub.seq, "type": "overflow", "missed": missed}
        return self.buffer.popleft() if self.buffer else None

    async def next(self) -> dict[str, Any] | None:
        """The next event, waiting for one; None once the subscription is closed."""
        while not self.closed:
            event = self.take()
            if event is not None:
                return event
            self._wake = anyio.Event()
            await self._wake.wait()
        return None

    def close(self) -> None:
        self.closed = True
        self.hub.subscribers.discard(self)
        self._wake.set()

    def __aiter__(self) -> AsyncIterator[dict[str, Any]]:
        return self._events()

    async def _events(self) -> AsyncIterator[dict[str, Any]]:
        while True:
            event = await self.next()
            if event is None:
                return
            yield event

    async def __aenter__(self) -> Subscription:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.close()


class EventHub:
    """The runtime's publisher: numbers events and hands each to every subscriber's buffer."""

    def __init__(self) -> None:
        self.seq = 0
        self.subscribers: set[Subscription] = set()

    @property
    def active(self) -> bool:
        """Whether anyone listens (an event costs nothing to make otherwise)."""
        return bool(self.subscribers)

    def publish(self, kind: str, **data: Any) -> None:
        self.seq += 1
        if not self.subscribers:
            return
        event = {"seq": self.seq, "type": kind, **data}
        for sub in list(self.subscribers):
            sub._offer(event)

    def subscribe(self, max_events: int = DEFAULT_MAX_EVENTS) -> Subscription:
        if not 1 <= max_events <= 100_000:
            raise InvalidArguments(f"max_events must be between 1 and 100000 (got {max_events})")
        sub = Subscription(self, max_events)
        self.subscribers.add(sub)
        return sub


__all__ = ["DEFAULT_MAX_EVENTS", "EventHub", "Subscription"]
