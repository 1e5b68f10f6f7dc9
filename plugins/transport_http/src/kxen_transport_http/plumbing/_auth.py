"""A request refused for want of credentials (401) or of scope (403 with a challenge).

The transport asks ``kxen_credential_lookup`` again with the :class:`~kxen_core.AuthChallenge`; when
the answer changes the headers it sends the request once more with them, and otherwise -- or when
the second try is refused too, or no plugin implements the hook -- the request fails with
:class:`~kxen_core.errors.AuthRequired`, whose text names the URL (without secrets) and the
challenge's ``error`` and ``error_description``, escaped and bounded, never a header value.
"""

from __future__ import annotations

import re

import httpx

from kxen_core import AuthChallenge, ServerConfig, TransportContext
from kxen_core.errors import AuthRequired, printable
from kxen_core.transport import CHALLENGE_MAX_CHARS

from ._headers import CredentialMemo, has_credential_hook, request_headers
from ._secrets import Redactor

#: the most ``WWW-Authenticate`` header lines of one answer that are read
MAX_CHALLENGE_VALUES = 16
#: the most characters of a challenge's ``error`` / ``error_description`` shown in a reason
MAX_PARAM_CHARS = 200
#: the most scopes taken from one challenge
MAX_SCOPES = 32

#: RFC 9449 §8.1: a nonce is 1 or more NQCHAR (visible ASCII but '"' and '\\'); bounded
_NONCE = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]{1,512}")
_PARAM = re.compile(r'([A-Za-z0-9_.-]{1,64})\s*=\s*(?:"((?:[^"\\]|\\.){0,4096})"|([^\s,"]{1,4096}))')


def refused_for_auth(response: httpx.Response) -> bool:
    """True for an answer that asks for credentials: 401, or 403 with a ``WWW-Authenticate``
    challenge (a 403 without one -- a refused Origin, say -- is no matter of signing in)."""
    status = response.status_code
    return status == 401 or (status == 403 and "www-authenticate" in response.headers)


def challenge_of(response: httpx.Response) -> AuthChallenge:
    """The answer's status and its ``WWW-Authenticate`` values joined by ``", "``, bounded."""
    values: list[str] = []
    size = 0
    for value in response.headers.get_list("www-authenticate")[:MAX_CHALLENGE_VALUES]:
        values.append(value[: CHALLENGE_MAX_CHARS - size])
        size += len(values[-1]) + 2
        if size >= CHALLENGE_MAX_CHARS:
            break
    nonce = response.headers.get("dpop-nonce", "")
    if not _NONCE.fullmatch(nonce):
        nonce = ""
    return AuthChallenge(status=response.status_code, www_authenticate=", ".join(values), dpop_nonce=nonce)


def nonce_challenge(challenge: AuthChallenge) -> bool:
    """A resource server's ``DPoP error="use_dpop_nonce"`` with a new ``DPoP-Nonce`` (RFC 9449 §9):
    answered once more per request, beyond the one answer every challenge gets."""
    if not challenge.dpop_nonce or challenge.status != 401:
        return False
    text = challenge.www_authenticate.lower()
    return "dpop" in text and challenge_params(challenge).get("error") == "use_dpop_nonce"


def challenge_params(challenge: AuthChallenge) -> dict[str, str]:
    """The auth-params of a challenge (``error``, ``scope``, ``resource_metadata``...), the first
    of each name; names lower-cased, quoted values unescaped. The server's text: untrusted."""
    params: dict[str, str] = {}
    for match in _PARAM.finditer(challenge.www_authenticate):
        name = match.group(1).lower()
        quoted, bare = match.group(2), match.group(3)
        value = re.sub(r"\\(.)", r"\1", quoted) if quoted is not None else bare
        params.setdefault(name, value)
    return params


def login_hint(server: ServerConfig, context: TransportContext) -> str:
    """The next step for a server that wants credentials: sign in when a plugin can, else configure."""
    pm = context.pm
    caller = getattr(pm.hook, "kxen_auth_login", None) if pm is not None else None
    if caller is not None and caller.get_hookimpls():
        return f"kxen mcp login {server.name}"
    return "add credentials (headers) in user config or install kxen-oauth"


def auth_required(
    server: ServerConfig, context: TransportContext, challenge: AuthChallenge, where: str, redact: Redactor
) -> AuthRequired:
    """The :class:`AuthRequired` a refused request fails with."""
    params = challenge_params(challenge)
    label = "Unauthorized" if challenge.status == 401 else "Forbidden"
    reason = f"HTTP {challenge.status} {label} from {where}"
    detail = [
        printable(redact(params[key], MAX_PARAM_CHARS)) for key in ("error", "error_description") if params.get(key)
    ]
    if detail:
        reason += ": " + ": ".join(detail)
    scopes: tuple[str, ...] = ()
    if params.get("error") == "insufficient_scope" or challenge.status == 403:
        scopes = tuple(params.get("scope", "").split()[:MAX_SCOPES])
    hint = login_hint(server, context)
    if scopes and hint.startswith("kxen mcp login"):
        hint += " --scope " + _quoted(" ".join(scopes))
    return AuthRequired(reason, next_step=hint, scopes=scopes, status=challenge.status)


def _quoted(text: str) -> str:
    return text if re.fullmatch(r"[A-Za-z0-9_.:/@+-]+", text) else "'" + text.replace("'", "'\\''") + "'"


async def answer_challenge(
    server: ServerConfig,
    context: TransportContext,
    method: str,
    url: str,
    sent: httpx.Headers,
    challenge: AuthChallenge,
    where: str,
    redact: Redactor,
    memo: CredentialMemo | None = None,
) -> httpx.Headers:
    """The headers to send a refused request again with, or :class:`AuthRequired`.

    Asks ``kxen_credential_lookup`` again with ``challenge``; the headers it does not set are kept
    as sent (the session's, ``Accept``...). When they come out the same as those sent (the plugin
    answered ``None``, or the same credential), or no plugin implements the hook, the request fails.
    An ``AuthRequired`` the plugin raises passes unchanged.
    """
    if has_credential_hook(context):
        fresh = await request_headers(server, context, method, url, redact, challenge=challenge, memo=memo)
        for name, value in sent.multi_items():
            if name not in fresh:
                fresh[name] = value
        if _items(fresh) != _items(sent):
            return fresh
    raise auth_required(server, context, challenge, where, redact)


def _items(headers: httpx.Headers) -> list[tuple[str, str]]:
    return sorted((name.lower(), value) for name, value in headers.multi_items())
