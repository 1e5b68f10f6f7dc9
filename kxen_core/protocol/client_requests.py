"""Requests a server sends to kxen: ``roots/list``, ``sampling/createMessage``, ``elicitation/create``.

The client capabilities kxen declares at initialize follow what the host can do: ``roots`` for a
local server (its workspace), ``sampling`` only when some plugin implements
``kxen_sampling_request`` and ``elicitation`` (form mode) only when some plugin implements
``kxen_elicitation_request``. A server request for a capability kxen did not declare (sampling or
elicitation without a plugin, roots from a remote server) is not served: it is answered with the
JSON-RPC error ``-32601`` "Method not found", the code every revision uses for a method the receiver
does not offer. A declared request is passed to its hook (first non-None answer wins); when none
answers, or one raises or answers something malformed, it gets the revision's own refusal: an
elicitation ``{"action": "decline"}``, a sampling request (which has no decline result) the error
``-1`` the sampling page names for a user's rejection. The bounds of serving (how many at once, how
long each) are those of :mod:`kxen_core.protocol.serving`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from kxen_core.asks import ElicitationRequest, SamplingRequest
from kxen_core.errors import PluginHookError
from kxen_core.hookcall import acall_first
from kxen_core.protocol.serving import ReplyError

if TYPE_CHECKING:
    from pathlib import Path

    from kxen_core.config import ServerConfig
    from kxen_core.plugins.manager import KxenPluginManager
    from kxen_core.protocol.serving import RequestHandler

SAMPLING = "sampling/createMessage"
ELICITATION = "elicitation/create"
ROOTS = "roots/list"
#: JSON-RPC error code of a declined sampling request (the spec's example for a user rejection)
DECLINED = -1
#: the capability a server request needs declared before kxen serves it
NEEDS = {ROOTS: "roots", SAMPLING: "sampling", ELICITATION: "elicitation"}


def has_handler(pm: KxenPluginManager, hook: str) -> bool:
    return bool(getattr(pm.hook, hook).get_hookimpls())


def client_capabilities(pm: KxenPluginManager, server: ServerConfig) -> dict[str, Any]:
    """What kxen declares at initialize for ``server``."""
    # roots only for a local server: a remote one never learns the workspace path
    caps: dict[str, Any] = {} if server.is_remote else {"roots": {"listChanged": False}}
    if has_handler(pm, "kxen_sampling_request"):
        caps["sampling"] = {}
    if has_handler(pm, "kxen_elicitation_request"):
        caps["elicitation"] = {"form": {}}
    return caps


def _valid_elicitation(answer: Any) -> bool:
    if type(answer) is not dict or answer.get("action") not in ("accept", "decline", "cancel"):
        return False
    content = answer.get("content")
    if answer["action"] != "accept" or content is None:
        return True
    primitive = (str, int, float, bool)
    return type(content) is dict and all(
        isinstance(v, primitive) or (type(v) is list and all(isinstance(i, str) for i in v)) for v in content.values()
    )


def _valid_sampling(answer: Any) -> bool:
    return (
        type(answer) is dict
        and isinstance(answer.get("model"), str)
        and answer.get("role") in ("user", "assistant")
        and isinstance(answer.get("content"), (dict, list))
    )


def request_handlers(
    pm: KxenPluginManager, server: ServerConfig, workspace: Path, diag: Callable[[str], None]
) -> dict[str, RequestHandler]:
    """The handlers of the requests ``server`` may send, for its session: only those of the
    capabilities :func:`client_capabilities` declares for it (the others get ``-32601``)."""

    async def ask(hook: str, request: Any) -> Any:
        try:
            return await acall_first(pm, hook, server=server, request=request)
        except PluginHookError as exc:
            diag(f"{hook}: {exc}; declined")
            return None

    async def roots_list(params: Mapping[str, Any]) -> dict[str, Any]:
        return {"roots": [{"uri": workspace.as_uri(), "name": workspace.name}]}

    async def sampling(params: Mapping[str, Any]) -> dict[str, Any]:
        answer = await ask("kxen_sampling_request", SamplingRequest(server=server.name, params=params))
        if answer is None:
            raise ReplyError(DECLINED, "sampling request declined: no handler in this host accepted it")
        if not _valid_sampling(answer):
            diag("kxen_sampling_request: an answer without model, role and content; declined")
            raise ReplyError(DECLINED, "sampling request declined: the host's answer was malformed")
        return answer

    async def elicitation(params: Mapping[str, Any]) -> dict[str, Any]:
        message, schema = params.get("message"), params.get("requestedSchema")
        request = ElicitationRequest(
            server=server.name,
            message=message if isinstance(message, str) else "",
            requested_schema=schema if isinstance(schema, dict) else {},
            params=params,
        )
        answer = await ask("kxen_elicitation_request", request)
        if answer is None:
            return {"action": "decline"}
        if not _valid_elicitation(answer):
            diag("kxen_elicitation_request: an answer that is not an elicitation result; declined")
            return {"action": "decline"}
        return answer

    declared = client_capabilities(pm, server)
    handlers = {ROOTS: roots_list, SAMPLING: sampling, ELICITATION: elicitation}
    return {method: handler for method, handler in handlers.items() if NEEDS[method] in declared}


__all__ = ["DECLINED", "ELICITATION", "NEEDS", "ROOTS", "SAMPLING", "client_capabilities", "request_handlers"]
