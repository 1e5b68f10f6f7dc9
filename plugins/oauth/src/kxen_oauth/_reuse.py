"""A stored Bearer token's header, handed to the transport as a :class:`~kxen_core.ReusableHeaders`:
the transport sends it again without asking the credential hook while its check passes, and asks
(so the engine looks again: refresh, sign-in, another record) as soon as it does not.

The check is everything the engine's answer depends on, read again before each request:

* the environment that picks the token store (``KXEN_DATA_DIR``, ``XDG_DATA_HOME``, ``HOME``:
  what :meth:`~.engine.OAuthEngine.store` keys its stores on), compared by value;
* the store file: :meth:`.store.TokenStore.token` stats it and reads it again when its mtime,
  ctime, size or inode changed (another process refreshed, replaced or removed the token; a
  401 forgets the cache), and only then makes new records, so the answer holds only while the
  store still gives exactly the record it was made from;
* the clock: never once the token is due (expired, or within ``REFRESH_AHEAD`` of it: the
  engine would refresh it);
* the engine: the token is still the one it last sent for the entry (a challenge or a logout
  changes that) and still among the secrets it scrubs; no store repair waits to be told.

The binding (config scope, server name, exact resource URL, home) is the engine's key, fixed for
the asking transport, which holds the answer for its own server, context and URL alone. A DPoP
token's header is never reusable (each request needs a new proof).
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING

from kxen_core import ReusableHeaders

from .refresh import REFRESH_AHEAD
from .store import StoreError, TokenStore

if TYPE_CHECKING:
    from ._ports import Key
    from ._records import TokenRecord
    from .engine import OAuthEngine

#: which token store is in force: the environment :func:`kxen_core.config.paths.data_dir` reads
Where = tuple[str | None, str | None, str | None]


def where() -> Where:
    """The values of the environment that pick the token store, read now."""
    env = os.environ
    return (env.get("KXEN_DATA_DIR"), env.get("XDG_DATA_HOME"), env.get("HOME"))


def reusable(
    engine: OAuthEngine, key: Key, record: TokenRecord, store: TokenStore, at: Where, header: dict[str, str]
) -> ReusableHeaders:
    """``header`` (``record``'s, from ``store``, found under environment ``at``) with its check."""
    token = record.access_token
    sent = engine._sent

    def still_valid() -> bool:
        try:
            if where() != at or store.repairs or store.token(key) is not record:
                return False
        except StoreError:
            return False  # asking reports it
        return not record.due(time.time(), REFRESH_AHEAD) and sent.get(key) == token and engine.holds(token)

    return ReusableHeaders(header, still_valid)


__all__ = ["Where", "reusable", "where"]
