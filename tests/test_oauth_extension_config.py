"""The ``oauth`` keys of workload identity, enterprise-managed authorization and DPoP: user config
loads them (with the file, key path and rule for a bad one), a project file is refused for each
of them, and the IdP client secret is a secret the core scrubs. (What they do: the tests beside
the OAuth plugin, plugins/oauth/tests/test_oauth_extensions.py, and the conformance rows.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from config_support import load_entry
from support import write_project

from kxen_core.config import load_config
from kxen_core.config.secrets import _entry_secrets
from kxen_core.config.trust import trust

URL = "https://mcp.example.com/mcp"
WIF = {"grant": "workload_identity", "workloadTokenFile": "/var/run/secrets/tokens/mcp"}
ENTERPRISE = {
    "grant": "enterprise_managed",
    "clientId": "kxen",
    "clientSecret": "cs-SECRET-1",
    "idpTokenEndpoint": "https://idp.example.com/token",
    "idpClientId": "kxen-idp",
    "idpClientSecret": "idp-SECRET-1",
    "idTokenFile": "/home/me/.kxen/id-token",
}


def test_user_config_loads_the_new_keys():
    _, wif = load_entry({"url": URL, "oauth": {**WIF, "dpop": True}})
    assert not isinstance(wif, list), wif
    assert wif.oauth is not None and wif.oauth.grant == "workload_identity" and wif.oauth.dpop is True
    _, corp = load_entry({"url": URL, "oauth": ENTERPRISE})
    assert not isinstance(corp, list), corp
    assert corp.oauth is not None and corp.oauth.idpTokenEndpoint == "https://idp.example.com/token"
    assert "idp-SECRET-1" not in repr(corp)
    assert "idp-SECRET-1" in _entry_secrets(corp)  # scrubbed from what servers send back


@pytest.mark.parametrize(
    ("oauth", "path", "rule"),
    [
        ({"grant": "workload_identity"}, "oauth.grant", "workload_identity needs oauth.workloadTokenFile"),
        ({**WIF, "workloadTokenFile": "token"}, "oauth.workloadTokenFile", "must be an absolute path"),
        ({"workloadTokenFile": "/t"}, "oauth.workloadTokenFile", "only used with grant workload_identity"),
        ({**ENTERPRISE, "idTokenFile": None}, "oauth.grant", "enterprise_managed needs oauth.idTokenFile"),
        ({**ENTERPRISE, "idpTokenEndpoint": None}, "oauth.grant", "enterprise_managed needs oauth.idpTokenEndpoint"),
        (
            {**ENTERPRISE, "clientId": None, "clientSecret": None},
            "oauth.grant",
            "enterprise_managed needs oauth.clientId",
        ),
        ({**ENTERPRISE, "idpClientId": None}, "oauth.idpClientSecret", "needs oauth.idpClientId"),
        ({"idpClientId": "x"}, "oauth.idpClientId", "only used with grant enterprise_managed"),
        ({**ENTERPRISE, "idpTokenEndpoint": "http://idp.example.com/token"}, "oauth.idpTokenEndpoint", "https"),
        ({"dpop": "yes"}, "oauth.dpop", ""),
    ],
)
def test_a_bad_key_is_named_with_file_key_path_and_rule(oauth: dict[str, Any], path: str, rule: str):
    entry = {"url": URL, "oauth": {k: v for k, v in oauth.items() if v is not None}}
    file, problems = load_entry(entry)
    assert isinstance(problems, list), problems
    mine = [p for p in problems if p.startswith(f"{file}: mcpServers.srv.{path}")]
    assert mine and rule in mine[0], problems
    assert not [p for p in problems if "SECRET" in p]  # never a secret's value


@pytest.mark.parametrize(
    ("oauth", "path"),
    [
        (WIF, "oauth.workloadTokenFile"),
        (WIF, "oauth.grant"),
        ({"dpop": False}, "oauth.dpop"),
        ({"dpop": True}, "oauth.dpop"),
        ({k: v for k, v in ENTERPRISE.items() if k != "clientSecret"}, "oauth.idTokenFile"),
        ({k: v for k, v in ENTERPRISE.items() if k != "clientSecret"}, "oauth.idpClientSecret"),
        ({k: v for k, v in ENTERPRISE.items() if k != "clientSecret"}, "oauth.idpTokenEndpoint"),
        ({k: v for k, v in ENTERPRISE.items() if k != "clientSecret"}, "oauth.idpClientId"),
    ],
)
def test_a_project_file_is_refused_for_each_key(kxen_home, ws: Path, oauth: dict[str, Any], path: str):
    pfile = write_project(ws, {"r": {"url": URL, "oauth": oauth}})
    trust(kxen_home.path, ws)
    config = load_config(None, ws)
    assert "r" not in config.servers
    found = [p for p in config.project_problems if p.startswith(f"{pfile}: mcpServers.r.{path}: project config must")]
    assert found, config.project_problems
    assert "user config" in found[0]
    assert not [p for p in config.project_problems if "SECRET" in p]
