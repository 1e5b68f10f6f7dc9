"""What a server asks the host for, as host hooks see it (``kxen_sampling_request``,
``kxen_elicitation_request``). Plain values; the handling is in :mod:`kxen_core.client_requests`."""

from __future__ import annotations

from typing import Any, Mapping

import attrs


@attrs.frozen(kw_only=True)
class SamplingRequest:
    """A server's ``sampling/createMessage``: ``params`` as the server sent it (``messages``,
    ``maxTokens``, ``systemPrompt``, ``modelPreferences``...). Everything in it is the server's text:
    untrusted, and to be escaped before it is shown (``kxen_core.safe_text``)."""

    server: str
    params: Mapping[str, Any]


@attrs.frozen(kw_only=True)
class ElicitationRequest:
    """A server's ``elicitation/create``: the ``message`` to show, the ``requested_schema`` of the
    answer (flat: strings, numbers, booleans, enums), and ``params`` as sent. Untrusted text."""

    server: str
    message: str
    requested_schema: Mapping[str, Any]
    params: Mapping[str, Any]


__all__ = ["ElicitationRequest", "SamplingRequest"]
