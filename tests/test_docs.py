"""docs/hooks.md documents every hook, with its exact signature, and nothing that does not exist."""

from __future__ import annotations

import inspect
import re
import types
from pathlib import Path

import pytest

from kxen_core import hookspecs
from kxen_core.plugins.manager import make_plugin_manager

HOOKS_MD = Path(__file__).resolve().parents[1] / "docs" / "hooks.md"


@pytest.fixture(scope="module")
def text() -> str:
    return HOOKS_MD.read_text(encoding="utf-8")


def spec_names() -> list[str]:
    """Every hook the plugin manager has a spec for."""
    pm = make_plugin_manager(load_entrypoints=False)
    return sorted(name for name in dir(pm.hook) if name.startswith("kxen_") and getattr(pm.hook, name).has_spec())


def signature(name: str) -> str:
    params = inspect.signature(getattr(hookspecs, name)).parameters
    return f"{name}({', '.join(params)})"


def sections(text: str) -> dict[str, str]:
    """``## kxen_x`` heading -> the text up to the next level-2 heading."""
    parts = re.split(r"^## ", text, flags=re.MULTILINE)
    out: dict[str, str] = {}
    for part in parts[1:]:
        heading, _, body = part.partition("\n")
        out[heading.strip()] = body
    return out


def test_manager_specs_are_the_declared_hooks():
    assert spec_names() == sorted(hookspecs.HOOK_NAMES)
    assert spec_names(), "no hooks found"


@pytest.mark.parametrize("name", sorted(hookspecs.HOOK_NAMES))
def test_every_hook_has_a_heading_and_its_exact_signature(text, name):
    assert re.search(rf"^## {name}$", text, flags=re.MULTILINE), f"docs/hooks.md has no '## {name}' heading"
    section = sections(text)[name]
    assert f"`{signature(name)}`" in section, f"the section of {name} lacks `{signature(name)}`"


def test_no_section_for_a_hook_that_does_not_exist(text):
    documented = {h for h in sections(text) if h.startswith("kxen_")}
    assert documented == set(hookspecs.HOOK_NAMES), documented ^ set(hookspecs.HOOK_NAMES)
    # and no stale signature of a hook that is gone
    for mention in set(re.findall(r"`(kxen_\w+)\(", text)):
        assert mention in hookspecs.HOOK_NAMES, mention


@pytest.mark.parametrize("name", sorted(hookspecs.HOOK_NAMES))
def test_each_section_states_its_result_protocol(text, name):
    section = sections(text)[name]
    doc = inspect.getdoc(getattr(hookspecs, name)) or ""
    assert "**Answers:**" in section and "**Protocol:**" in section and "**When:**" in section
    if name in hookspecs.ASYNC_HOOKS:
        assert "async-capable" in section
        helper = "acall_first" if "acall_first" in doc else "acall_all"
        assert helper in doc, f"the spec docstring of {name} names neither helper"
        assert f"`{helper}`" in section
    else:
        assert "not async-capable" in section
    opts = getattr(getattr(hookspecs, name), "kxen_spec", {}) or {}
    if opts.get("firstresult") or "First non-None" in doc:
        assert "first non-None" in section
    if "Veto" in doc:
        assert "veto" in section


def _examples(section: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)


@pytest.mark.parametrize("name", sorted(hookspecs.HOOK_NAMES))
def test_each_example_implements_its_hook_and_validates(text, name):
    examples = _examples(sections(text)[name])
    assert examples, f"the section of {name} has no python example"
    for source in examples:
        mod = types.ModuleType(f"docs_example_{name}")
        exec(compile(source, f"docs/hooks.md:{name}", "exec"), mod.__dict__)
        impl = getattr(mod, name, None)
        assert impl is not None, f"the example of {name} does not define {name}"
        pm = make_plugin_manager(load_entrypoints=False)
        pm.register(mod, name=mod.__name__)  # raises on argument names the spec does not have
        pm.check_pending()
        assert any(i.plugin is mod for i in getattr(pm.hook, name).get_hookimpls())


@pytest.mark.anyio
async def test_the_transport_example_registers_a_kind_that_opens_and_answers(text, tmp_path):
    """The kxen_register_transports example is a working kind: its options are checked at load and
    a runtime reaches ready through it."""
    import json

    from kxen_core import Runtime

    (source,) = _examples(sections(text)["kxen_register_transports"])
    mod = types.ModuleType("docs_example_transport")
    exec(compile(source, "docs/hooks.md:kxen_register_transports", "exec"), mod.__dict__)
    pm = make_plugin_manager(load_entrypoints=False, extra=[mod])
    assert pm.transports.get("loopback").options is mod.LoopbackOptions
    (tmp_path / "mcp.json").write_text(
        json.dumps({"mcpServers": {"lo": {"transport": "loopback", "options": {"label": "x"}}}})
    )
    async with Runtime(home=tmp_path, workspace=tmp_path, pm=pm) as rt:
        assert await rt.wait_ready(5)
        # the toy peer answered initialize with {}: the session ran on the stream the example opened
        (status,) = rt.status()
        assert (status["transport"], status["state"], status["phase"]) == ("loopback", "failed", "initialize"), status
        assert "protocol version" in status["error"], status
