"""The secrets the OAuth engine handled in this process (tokens, client secrets): scrubbed from what
it reports, and handed to the core through ``kxen_register_secrets`` so nothing a server echoes of
them reaches the agent, a terminal, a status or a log."""

from __future__ import annotations

#: at most this many secrets are kept; past it the oldest half goes (gone from every store by then)
MAX_HELD = 1000


class HeldSecrets:
    """Mixed into :class:`kxen_oauth.engine.OAuthEngine`."""

    def __init__(self) -> None:
        self._secrets: dict[str, None] = {}  # insertion order: the oldest first
        self._changes = 0  # counts every change, so a frozen copy is made again only after one
        self._held: frozenset[str] = frozenset()
        self._held_at = 0

    def scrub(self, text: str, *extra: str) -> str:
        """``text`` with every secret this process handled replaced by ``***``."""
        for secret in (*self._secrets, *extra):
            if secret and len(secret) >= 4 and secret in text:
                text = text.replace(secret, "***")
        return text

    def remember(self, *values: str | None) -> None:
        for v in values:
            if v and v not in self._secrets:
                self._secrets[v] = None
                self._changes += 1
        if len(self._secrets) > MAX_HELD:
            self._secrets = dict.fromkeys(list(self._secrets)[-(MAX_HELD // 2) :])
            self._changes += 1

    def holds(self, value: str) -> bool:
        """Whether ``value`` is among the secrets this process scrubs."""
        return value in self._secrets

    def held_secrets(self) -> frozenset[str]:
        """Every token and client secret this process holds (``kxen_register_secrets``): the same
        object while nothing changed, so the core's check stays O(1)."""
        if self._held_at != self._changes:
            self._held, self._held_at = frozenset(self._secrets), self._changes
        return self._held


__all__ = ["MAX_HELD", "HeldSecrets"]
