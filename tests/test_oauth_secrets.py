"""No access token, refresh token, client secret, authorization code or code_verifier ever appears
in logs, diagnostics, status, errors or exception text: a full flow against the OAuth peer (sign-in,
a forced expiry, a server-side expiry, a refused refresh), with every output captured and grepped."""

from __future__ import annotations

import json
import logging
import time
from urllib.parse import parse_qs, urlsplit

import kxen_oauth.flow
import pytest
from kxen_testing import running
from oauth_support import OAUTH_PLUGINS, Follower, auth_peer, peer_expire, store_file, stored
from remote_support import remote, remote_on, status_of, until

from kxen_core.errors import AuthRequired, KxenError

pytestmark = pytest.mark.anyio


def store_secrets(seen: set[str]) -> None:
    doc = stored()
    for t in doc["tokens"]:
        seen.update(v for v in (t.get("accessToken"), t.get("refreshToken")) if v)
    seen.update(c["clientSecret"] for c in doc["clients"] if c.get("clientSecret"))


async def test_no_secret_in_any_output_of_a_whole_flow(kxen_home, ws, start_peer, caplog, capsys, monkeypatch):
    caplog.set_level(logging.DEBUG)
    generated: list[str] = []
    real = kxen_oauth.flow.secrets.token_urlsafe

    def recording(n: int) -> str:
        value = real(n)
        generated.append(value)  # the state and the code_verifier
        return value

    monkeypatch.setattr(kxen_oauth.flow.secrets, "token_urlsafe", recording)
    url, _ = auth_peer(start_peer)
    kxen_home.write_settings(remote_on(url))
    follower = Follower()
    seen: set[str] = set()
    texts: list[str] = []
    diagnostics: list[str] = []
    async with running(kxen_home, ws, follower, servers={"r": remote(url)}, allow=OAUTH_PLUGINS) as rt:
        assert status_of(rt, "r")["state"] == "ready"
        store_secrets(seen)
        texts.append(json.dumps(rt.status()))
        texts.append(json.dumps(await rt.call_tool("r__whoami", {})))
        peer_expire(url)  # a 401, then a refresh
        texts.append(json.dumps(await rt.call_tool("r__whoami", {})))
        store_secrets(seen)
        doc = stored()
        doc["tokens"][0]["expiresAt"] = time.time() - 5  # due: refreshed ahead of the next request
        store_file().write_text(json.dumps(doc))
        texts.append(json.dumps(await rt.call_tool("r__whoami", {})))
        store_secrets(seen)
        # a refused refresh: the server goes to needs_login with a reason
        doc = stored()
        doc["tokens"][0]["expiresAt"] = time.time() - 5
        seen.add(doc["tokens"][0]["refreshToken"])
        doc["tokens"][0]["refreshToken"] = "RT-the-peer-never-issued-0123456789"
        seen.add(doc["tokens"][0]["refreshToken"])
        store_file().write_text(json.dumps(doc))
        peer_expire(url)
        failed = None
        try:
            await rt.call_tool("r__whoami", {})
        except KxenError as exc:
            failed = exc
            texts += [str(exc), repr(exc), repr(exc.__cause__), repr(exc.__context__)]
        # the failed transport settles the server in needs_login (the call's error came first)
        await until(lambda: status_of(rt, "r")["state"] != "ready", timeout=20)
        final = status_of(rt, "r")
        texts.append(json.dumps(rt.status()))
        texts.append(json.dumps(rt.diagnostics) if hasattr(rt, "diagnostics") else "")
    codes = [parse_qs(urlsplit(u).query).get("code", [""])[0] for u in follower.landed]
    secrets = seen | set(generated) | {c for c in codes if c}
    assert len(generated) >= 2 and all(codes) and len(seen) >= 4, (generated, codes, seen)
    out, err = capsys.readouterr()
    texts += [out, err, caplog.text, *diagnostics]
    everything = "\n".join(texts)
    assert isinstance(failed, AuthRequired), repr(failed)
    assert (final["state"], final["next"]) == ("needs_login", "kxen mcp login r"), final
    assert "invalid_grant" in final["error"], final
    for secret in secrets:
        if secret in everything:
            i = everything.index(secret)
            kind = (
                "state"
                if secret in generated[::2]
                else "verifier"
                if secret in generated
                else "code"
                if secret in codes
                else "stored"
            )
            raise AssertionError(f"a secret ({kind}) leaked: ...{everything[max(0, i - 300) : i]}")
