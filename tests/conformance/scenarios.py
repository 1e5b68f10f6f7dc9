"""What each conformance scenario asks the client to do, beyond initialize and listing (which the
Runtime does on start), and the ``oauth`` block a user would write for the credentials a scenario
hands over in ``MCP_CONFORMANCE_CONTEXT``.

Scenario expectations, from the harness's scenario sources:

* ``tools_call``: call ``add_numbers`` with numbers (5 and 3, as the reference clients do);
* ``sse-retry``: call ``test_reconnection`` (the answer comes on the resumed GET stream);
* ``elicitation-sep1034-client-defaults``: call ``test_client_elicitation_defaults``; the server's
  ``elicitation/create`` is answered by the headless handler with the schema's defaults;
* ``json-schema-2020-12-preservation``: pass the ``inputSchema`` kxen holds for
  ``json_schema_2020_12_tool`` back, as it is, as the ``schema`` argument of ``json_schema_echo``;
* every ``auth/*`` scenario: sign in as the server asks, then call ``test-tool``;
* the 2026-07-28 scenarios (MRTR, the HTTP header ones): :mod:`modern`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import modern

from kxen_core import KxenError, Runtime

Log = Callable[[str], None]

#: fixed calls: scenario -> [(tool, arguments)]
CALLS: dict[str, list[tuple[str, dict[str, Any]]]] = {
    "tools_call": [("add_numbers", {"a": 5, "b": 3})],
    "sse-retry": [("test_reconnection", {})],
    "elicitation-sep1034-client-defaults": [("test_client_elicitation_defaults", {})],
}
FOCAL_TOOL = "json_schema_2020_12_tool"
ECHO_TOOL = "json_schema_echo"
AUTH_TOOL = "test-tool"
#: the Client ID Metadata Document URL of the harness's test client: the client_id the
#: ``auth/basic-cimd`` authorization server expects (it cannot fetch it; a real one would)
CLIENT_METADATA_URL = "https://conformance-test.local/client-metadata.json"


def _private_file(path: Path, text: str) -> str:
    """``text`` in a new 0600 file (as a user keeps a key or a token); its path."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return str(path)


def oauth_block(scenario: str, context: dict[str, Any], home: Path) -> dict[str, Any]:
    """The ``oauth`` keys of the user's server entry ({} for none).

    Every ``auth/*`` scenario: the test client's metadata document URL (``clientMetadataUrl``, used
    where the authorization server supports such documents, as a user publishing one would set
    it). The context's ``client_id`` (+ ``client_secret``): a pre-registered client. The
    ``auth/client-credentials-*`` scenarios are the headless client-credentials grant: a secret
    (``client_secret_basic``) or a private key (``private_key_jwt``, the key written to a 0600 file
    in the home, as a user keeps one). ``auth/wif-jwt-bearer``: the workload-identity grant with the
    context's valid platform token in a 0600 file. ``auth/enterprise-managed-authorization`` (and
    0.1.16's ``auth/cross-app-access-complete-flow``): enterprise-managed authorization with the
    context's ID token in a 0600 file, the IdP's token endpoint and client id. The DPoP scenarios
    hand over nothing: kxen uses DPoP because their authorization server lists ES256.
    """
    block: dict[str, Any] = {"clientMetadataUrl": CLIENT_METADATA_URL} if scenario.startswith("auth/") else {}
    jwt = context.get("valid_jwt")
    if isinstance(jwt, str) and jwt:  # workload identity: the platform token, as a pod has it in a file
        block["grant"] = "workload_identity"
        block["workloadTokenFile"] = _private_file(home / "workload-token", jwt)
    id_token, idp_token = context.get("idp_id_token"), context.get("idp_token_endpoint")
    if isinstance(id_token, str) and id_token and isinstance(idp_token, str) and idp_token:
        block["grant"] = "enterprise_managed"  # the user's ID token from the enterprise IdP sign-in
        block["idTokenFile"] = _private_file(home / "id-token", id_token)
        block["idpTokenEndpoint"] = idp_token
        idp_client = context.get("idp_client_id")
        if isinstance(idp_client, str) and idp_client:
            block["idpClientId"] = idp_client
    client_id = context.get("client_id")
    if not isinstance(client_id, str) or not client_id:
        return block
    block["clientId"] = client_id
    secret = context.get("client_secret")
    if isinstance(secret, str) and secret:
        block["clientSecret"] = secret
    pem = context.get("private_key_pem")
    if isinstance(pem, str) and pem:
        block["privateKeyFile"] = _private_file(home / "client-key.pem", pem)
        block["tokenEndpointAuthMethod"] = "private_key_jwt"
        alg = context.get("signing_algorithm")
        if isinstance(alg, str) and alg:
            block["signingAlgorithm"] = alg
    if scenario.startswith("auth/client-credentials-"):
        block["grant"] = "client_credentials"
        if "clientSecret" in block and "privateKeyFile" not in block:
            block["tokenEndpointAuthMethod"] = "client_secret_basic"
    return block


def _text(result: dict[str, Any]) -> str:
    content = result.get("content")
    parts = [c.get("text", "") for c in content if isinstance(c, dict)] if isinstance(content, list) else []
    return " ".join(p for p in parts if isinstance(p, str))[:300]


async def _call(rt: Runtime, server: str, tool: str, args: dict[str, Any], say: Log) -> bool:
    try:
        result = await rt.call_tool(tool, args, server=server)
    except KxenError as exc:
        say(f"{tool} failed: {type(exc).__name__}: {exc}")
        return False
    say(f"{tool} -> {'error: ' if result.get('isError') else ''}{_text(result)}")
    return not result.get("isError")


async def run_scenario(rt: Runtime, server: str, scenario: str, say: Log) -> int:
    """Do what ``scenario`` asks of a started runtime; the client's exit code."""
    (status,) = [s for s in rt.status() if s["name"] == server]
    say(f"server {status['state']} {status['phase'] or ''} {status['error'] or ''} next: {status['next']}")
    if status["state"] != "ready":
        for line in status["diagnostics"][-5:]:
            say(f"diagnostic: {line}")
        # the initialize scenario's mock only speaks initialize; listing may fail after it
        return 0 if scenario == "initialize" and status["phase"] == "catalog" else 1
    tools = {t["name"]: t for t in rt.tools(server)}
    calls = list(CALLS.get(scenario, [])) + modern.calls_for(scenario, os.environ.get("MCP_CONFORMANCE_CONTEXT"))
    if scenario == "json-schema-2020-12-preservation":
        if FOCAL_TOOL not in tools:
            say(f"{FOCAL_TOOL} is not in the catalog")
            return 1
        calls.append((ECHO_TOOL, {"schema": tools[FOCAL_TOOL]["inputSchema"]}))
    elif scenario.startswith("auth/") and AUTH_TOOL in tools:
        calls.append((AUTH_TOOL, {}))
    for tool, args in calls:
        if not await _call(rt, server, tool, args, say):
            return 1
    failed = await modern.extras(rt, server, scenario)
    for line in failed:
        say(line)
    return 1 if failed else 0
