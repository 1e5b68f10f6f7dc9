"""What a server says about itself at the start: its ``serverInfo`` (name, title, version) and its
``instructions`` (its own guidance for the model), as the status, the Settings API and the model
formats give them: escaped (:func:`kxen_core.safe_text.safe_text`), bounded, and worked out once
per session (the status is read often).

Instructions are the server's own text for the model: a project or remote server's are as
unverified as its tool descriptions (``scope`` says whose they are), and a host that puts them in
a prompt puts the server's words there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kxen_core.safe_text import safe_text

if TYPE_CHECKING:
    from kxen_core.protocol.session import Session

#: the most characters of a server's instructions kept (the rest is cut, and said so)
MAX_INSTRUCTIONS_CHARS = 8000
#: the most characters of each ``serverInfo`` string kept
MAX_INFO_CHARS = 200
#: the ``serverInfo`` keys kept (strings only)
INFO_KEYS = ("name", "title", "version")

_cache: dict[int, tuple[Any, dict[str, Any]]] = {}
#: sessions remembered at most (a session ends with its connection: older ones are forgotten)
MAX_CACHED = 256


def server_words(session: Session | None) -> dict[str, Any]:
    """``serverInfo`` (``name``, ``title``, ``version``: the strings the server sent, escaped and
    bounded; ``{}`` before it started) and ``instructions`` (escaped, newlines kept, at most
    :data:`MAX_INSTRUCTIONS_CHARS`; None when it sent none)."""
    init = session.initialized if session is not None else None
    if init is None:
        return {"serverInfo": {}, "instructions": None}
    key = id(init)
    hit = _cache.get(key)
    if hit is not None and hit[0] is init:
        return hit[1]
    raw = init.server_info if isinstance(init.server_info, dict) else {}
    info = {k: safe_text(raw[k][:MAX_INFO_CHARS]) for k in INFO_KEYS if isinstance(raw.get(k), str)}
    text = init.instructions
    instructions = None
    if isinstance(text, str) and text.strip():
        instructions = safe_text(text[:MAX_INSTRUCTIONS_CHARS], multiline=True)
        if len(text) > MAX_INSTRUCTIONS_CHARS:
            instructions += f"\n[cut: {len(text)} characters]"
    words = {"serverInfo": info, "instructions": instructions}
    if len(_cache) >= MAX_CACHED:
        _cache.clear()
    _cache[key] = (init, words)
    return words


__all__ = ["MAX_INSTRUCTIONS_CHARS", "server_words"]
