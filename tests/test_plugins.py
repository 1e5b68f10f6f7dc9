"""Plugin manager: isolated entry-point loading, allow/block lists, hook validation, async hook calls."""

from __future__ import annotations

import inspect
import types
from typing import Any

import pluggy
import pytest

import kxen_core.plugins.manager as plugins_mod
from kxen_core import hookimpl, hookspecs
from kxen_core.errors import PluginHookError
from kxen_core.hookcall import acall_all, acall_first
from kxen_core.hookspecs import ASYNC_HOOKS, HOOK_NAMES
from kxen_core.plugins.manager import make_plugin_manager

pytestmark = pytest.mark.anyio


# --- fake entry points ------------------------------------------------------------------------


class FakeDist:
    def __init__(self, name: str, version: str = "1.0") -> None:
        self.metadata = {"Name": name}
        self.version = version


class FakeEntryPoint:
    def __init__(self, name: str, target: Any, dist: str | None = None, version: str = "1.0") -> None:
        self.name = name
        self.group = "kxen"
        self.value = f"{name}_module"
        self.dist = FakeDist(dist, version) if dist is not None else None
        self._target = target
        self.loads = 0

    def load(self) -> Any:
        self.loads += 1
        if isinstance(self._target, BaseException):
            raise self._target
        return self._target


@pytest.fixture
def entry_points(monkeypatch):
    """Install fake entry points behind the one metadata seam; returns the (mutable) list."""
    eps: list[FakeEntryPoint] = []
    groups: list[str] = []

    def fake_distributions(*, path: list[str]):
        groups.append(path)
        # one distribution per entry point (an entry point without a dist gets a nameless one)
        return [types.SimpleNamespace(_normalized_name=f"fake_{i}", entry_points=[ep]) for i, ep in enumerate(eps)]

    monkeypatch.setattr(plugins_mod, "importlib_metadata", types.SimpleNamespace(distributions=fake_distributions))
    monkeypatch.delenv("KXEN_LOAD_PLUGINS", raising=False)
    monkeypatch.delenv("KXEN_DISABLE_PLUGINS", raising=False)
    yield eps
    assert all("" not in path for path in groups)


def module(name: str, **functions: Any) -> types.ModuleType:
    """A plugin module built from plain functions (tox ``register_inline_plugin`` style)."""
    mod = types.ModuleType(name)
    for fname, fn in functions.items():
        fn.__name__ = fname
        setattr(mod, fname, fn)
    return mod


def transport_plugin(name: str, kind: str) -> types.ModuleType:
    @hookimpl
    def kxen_register_transports(register):
        register(kind, lambda server, context: f"{name}-transport")

    return module(name, kxen_register_transports=kxen_register_transports)


def loaded_names(pm) -> set[str]:
    return {p.name for p in pm.infos() if p.source == "entry point"}


def failure(pm, entry_point: str):
    found = [f for f in pm.failures if f.entry_point == entry_point]
    assert len(found) == 1, pm.failures
    return found[0]


@pytest.fixture
def pm():
    return make_plugin_manager(load_entrypoints=False)


# --- isolated loading -------------------------------------------------------------------------


def test_broken_import_is_recorded_and_others_still_load(entry_points):
    good_a = transport_plugin("a", "alpha")
    good_z = transport_plugin("z", "zeta")
    entry_points += [
        FakeEntryPoint("zeta", good_z, dist="kxen-zeta", version="2.1"),
        FakeEntryPoint("broken", ImportError("No module named 'missing_dep'"), dist="kxen-broken"),
        FakeEntryPoint("alpha", good_a, dist="kxen-alpha"),
    ]
    pm = make_plugin_manager()
    assert loaded_names(pm) == {"alpha", "zeta"}
    f = failure(pm, "broken")
    assert f.dist == "kxen-broken" and not f.skipped
    assert "ImportError" in f.error and "missing_dep" in f.error
    assert f.display() == "kxen-broken[broken]"
    # a kind nobody serves names the failed plugin as a possible provider
    assert "plugins that failed to load: kxen-broken[broken]" in pm.transports.unknown_rule("broken", pm.broken())
    assert pm.transports.get("alpha").plugin == "alpha"
    info = {p.name: p for p in pm.infos()}["zeta"]
    assert (info.dist, info.version, info.entry_point, info.source) == ("kxen-zeta", "2.1", "zeta", "entry point")
    assert info.hooks == ("kxen_register_transports",)
    assert info.transports == ("zeta",)
    # the loaded plugins answer
    assert pm.transports.get("zeta").opener(None, None) == "z-transport"


@pytest.mark.parametrize(
    "error", [RuntimeError("boom at import"), SyntaxError("bad syntax"), AttributeError("x"), ValueError("v")]
)
def test_any_exception_at_import_is_recorded(entry_points, error):
    entry_points += [FakeEntryPoint("bad", error, dist="d"), FakeEntryPoint("good", transport_plugin("g", "g"))]
    pm = make_plugin_manager()
    assert loaded_names(pm) == {"good"}
    assert type(error).__name__ in failure(pm, "bad").error


def test_entry_points_are_loaded_in_sorted_order_one_at_a_time(entry_points):
    order: list[str] = []

    class Recording(FakeEntryPoint):
        def load(self):
            order.append(self.name)
            return super().load()

    entry_points += [Recording(n, transport_plugin(n, n), dist=f"d-{n}") for n in ("c", "a", "b")]
    make_plugin_manager()
    assert order == ["a", "b", "c"]


def test_defaults_are_registered_and_listed(pm):
    defaults = [p for p in pm.infos() if p.source == "default"]
    assert defaults, "the core's fail-closed defaults must always be registered"
    assert all(p.dist is None for p in defaults)
    assert any("kxen_policy_decision" in p.hooks for p in defaults)
    assert pm.failures == []


def test_no_entry_points_loaded_when_disabled(entry_points):
    ep = FakeEntryPoint("x", transport_plugin("x", "x"))
    entry_points.append(ep)
    pm = make_plugin_manager(load_entrypoints=False)
    assert ep.loads == 0
    assert loaded_names(pm) == set()


def test_duplicate_entry_point_name_is_recorded(entry_points):
    # no first-come winner: a dist naming its entry point ``stdio`` does not take the name from the
    # real plugin (or the other way round, whichever sorts first); both fail, each naming the other
    entry_points += [
        FakeEntryPoint("stdio", transport_plugin("one", "stdio"), dist="kxen-one"),
        FakeEntryPoint("stdio", transport_plugin("two", "stdio"), dist="kxen-two"),
    ]
    pm = make_plugin_manager()
    assert loaded_names(pm) == set()
    assert [ep.loads for ep in entry_points] == [0, 0]  # neither is even imported
    found = {f.dist: f for f in pm.failures if f.entry_point == "stdio"}
    assert set(found) == {"kxen-one", "kxen-two"} and not any(f.skipped for f in found.values())
    assert "kxen-two[stdio]" in found["kxen-one"].error and "kxen-one[stdio]" in found["kxen-two"].error
    assert "none of them is loaded" in found["kxen-one"].error
    assert pm.transports.get("stdio") is None


def test_same_plugin_object_under_two_names_is_recorded(entry_points):
    shared = transport_plugin("shared", "s")
    entry_points += [FakeEntryPoint("a", shared, dist="d1"), FakeEntryPoint("b", shared, dist="d2")]
    pm = make_plugin_manager()
    assert loaded_names(pm) == {"a"}
    assert failure(pm, "b").error


def test_impl_with_wrong_argument_names_is_recorded(entry_points):
    @hookimpl
    def kxen_transport_closed(server, why):  # "why" is not an argument of the spec
        return None

    entry_points += [
        FakeEntryPoint("wrongargs", module("w", kxen_transport_closed=kxen_transport_closed), dist="d"),
        FakeEntryPoint("ok", transport_plugin("ok", "ok"), dist="d2"),
    ]
    pm = make_plugin_manager()
    assert loaded_names(pm) == {"ok"}
    assert "why" in failure(pm, "wrongargs").error


# --- allowlist and blocklist ------------------------------------------------------------------


@pytest.fixture
def three(entry_points):
    entry_points += [
        FakeEntryPoint("stdio", transport_plugin("s", "stdio"), dist="kxen-transport-stdio"),
        FakeEntryPoint("http", transport_plugin("h", "http"), dist="kxen-transport-http"),
        FakeEntryPoint("tty", module("t"), dist="kxen-approval-tty"),
    ]
    return entry_points


def _skipped(pm) -> set[str]:
    return {f.entry_point for f in pm.failures if f.skipped}


def test_allowlist_by_entry_point_name(three, monkeypatch):
    monkeypatch.setenv("KXEN_LOAD_PLUGINS", "stdio, tty")
    pm = make_plugin_manager()
    assert loaded_names(pm) == {"stdio", "tty"}
    assert _skipped(pm) == {"http"}
    assert three[1].loads == 0  # a plugin not allowed is never imported
    assert [f for f in pm.failures if not f.skipped] == []


def test_allowlist_by_distribution_name(three, monkeypatch):
    monkeypatch.setenv("KXEN_LOAD_PLUGINS", "kxen-transport-http")
    pm = make_plugin_manager()
    assert loaded_names(pm) == {"http"}
    assert _skipped(pm) == {"stdio", "tty"}


def test_empty_allowlist_loads_nothing(three, monkeypatch):
    monkeypatch.setenv("KXEN_LOAD_PLUGINS", "")
    pm = make_plugin_manager()
    assert loaded_names(pm) == set()
    assert all(ep.loads == 0 for ep in three)
    assert _skipped(pm) == {"stdio", "http", "tty"}
    # the defaults are still there: the host keeps failing closed
    assert any(p.source == "default" for p in pm.infos())


def test_allow_argument_wins_over_environment(three, monkeypatch):
    monkeypatch.setenv("KXEN_LOAD_PLUGINS", "stdio")
    pm = make_plugin_manager(allow=["http"])
    assert loaded_names(pm) == {"http"}


def test_blocklist(three, monkeypatch):
    monkeypatch.setenv("KXEN_DISABLE_PLUGINS", "http,kxen-approval-tty")
    pm = make_plugin_manager()
    assert loaded_names(pm) == {"stdio"}
    assert _skipped(pm) == {"http", "tty"}
    assert three[1].loads == 0 and three[2].loads == 0


def test_block_argument_and_environment_combine(three, monkeypatch):
    monkeypatch.setenv("KXEN_DISABLE_PLUGINS", "http")
    pm = make_plugin_manager(block=["tty"])
    assert loaded_names(pm) == {"stdio"}


def test_blocklist_beats_allowlist(three, monkeypatch):
    monkeypatch.setenv("KXEN_LOAD_PLUGINS", "stdio,http")
    monkeypatch.setenv("KXEN_DISABLE_PLUGINS", "stdio")
    pm = make_plugin_manager()
    assert loaded_names(pm) == {"http"}


def test_skipped_plugin_is_not_a_failure_for_its_kind(three, monkeypatch):
    monkeypatch.setenv("KXEN_DISABLE_PLUGINS", "http")
    pm = make_plugin_manager()
    rule = pm.transports.unknown_rule("http", pm.broken())
    assert "failed to load" not in rule and "install kxen[http]" in rule


# --- hook validation --------------------------------------------------------------------------


def test_misspelled_hook_is_refused_and_recorded(entry_points):
    @hookimpl
    def kxen_register_transport(register):
        register("never", lambda server, context: None)

    entry_points += [
        FakeEntryPoint("typo", module("typo", kxen_register_transport=kxen_register_transport), dist="kxen-typo"),
        FakeEntryPoint("fine", transport_plugin("fine", "fine"), dist="kxen-fine"),
    ]
    pm = make_plugin_manager()  # must not raise
    assert loaded_names(pm) == {"fine"}
    f = failure(pm, "typo")
    assert "kxen_register_transport" in f.error and not f.skipped
    assert not pm.has_plugin("typo")
    assert "typo" not in pm.origins
    assert pm.transports.get("never") is None
    caller = getattr(pm.hook, "kxen_register_transport", None)
    assert caller is None or caller.get_hookimpls() == []


def test_misspelled_hook_in_a_registered_plugin_is_an_error():
    class Typo:
        @hookimpl
        def kxen_policy_decison(self, call):
            return None

    with pytest.raises(pluggy.PluginValidationError, match="kxen_policy_decison"):
        make_plugin_manager(load_entrypoints=False, extra=[Typo()])


def _wrapper_plugin(name: str, hook: str, style: str) -> types.ModuleType:
    # pluggy needs the spec's exact argument names
    args = ", ".join(inspect.signature(getattr(hookspecs, hook)).parameters)
    ns: dict[str, Any] = {}
    exec(f"def {hook}({args}):\n    return (yield)\n", ns)
    marker = hookimpl(wrapper=True) if style == "wrapper" else hookimpl(hookwrapper=True)
    return module(name, **{hook: marker(ns[hook])})


@pytest.mark.parametrize("hook", sorted(ASYNC_HOOKS))
@pytest.mark.parametrize("style", ["wrapper", "hookwrapper"])
def test_wrapper_on_an_async_hook_is_refused_for_entry_points(entry_points, hook, style):
    entry_points += [
        FakeEntryPoint("wrap", _wrapper_plugin("wrap", hook, style), dist="kxen-wrap"),
        FakeEntryPoint("fine", transport_plugin("fine", "fine"), dist="kxen-fine"),
    ]
    pm = make_plugin_manager()
    assert loaded_names(pm) == {"fine"}
    assert "async-capable" in failure(pm, "wrap").error
    assert all(not (i.wrapper or i.hookwrapper) for i in getattr(pm.hook, hook).get_hookimpls())


@pytest.mark.parametrize("hook", sorted(ASYNC_HOOKS))
def test_wrapper_on_an_async_hook_is_refused_for_registered_plugins(hook):
    with pytest.raises(PluginHookError) as info:
        make_plugin_manager(load_entrypoints=False, extra=[_wrapper_plugin("wrapx", hook, "wrapper")])
    assert info.value.hook == hook
    assert info.value.plugin == "wrapx"


def test_wrapper_on_a_sync_hook_is_allowed(entry_points):
    entry_points.append(FakeEntryPoint("w", _wrapper_plugin("w", "kxen_transport_closed", "wrapper"), dist="d"))
    pm = make_plugin_manager()
    assert loaded_names(pm) == {"w"}


def test_every_spec_is_known_to_the_manager(pm):
    for name in HOOK_NAMES:
        assert getattr(pm.hook, name).has_spec(), name
    assert ASYNC_HOOKS <= set(HOOK_NAMES)


# --- acall_first / acall_all ------------------------------------------------------------------


SERVER = types.SimpleNamespace(name="srv", kind="http")


@pytest.fixture
def bare():
    """A manager with the specs and no plugins at all (not even the core defaults)."""
    return plugins_mod.KxenPluginManager()


def register(pm, name: str, hook: str, fn, **marks: Any):
    fn.__name__ = hook
    pm.register(module(name, **{hook: hookimpl(**marks)(fn)}), name=name)


async def test_acall_first_awaits_before_testing_for_none(bare):
    calls: list[str] = []

    async def async_none(server, request):
        calls.append("async-none")
        return None

    def sync_answer(server, request):
        calls.append("sync")
        return {"Authorization": "Bearer t"}

    register(bare, "sync", "kxen_credential_lookup", sync_answer)
    register(bare, "asyncnone", "kxen_credential_lookup", async_none)  # registered last: asked first
    answer = await acall_first(bare, "kxen_credential_lookup", server=SERVER, request=None)
    assert answer == {"Authorization": "Bearer t"}
    assert calls == ["async-none", "sync"]


async def test_acall_first_returns_an_awaited_value_not_a_coroutine(bare):
    async def answer(server, request):
        return {"X": "1"}

    register(bare, "a", "kxen_credential_lookup", answer)
    result = await acall_first(bare, "kxen_credential_lookup", server=SERVER, request=None)
    assert result == {"X": "1"}


async def test_acall_first_stops_at_the_first_answer(bare):
    asked: list[str] = []

    def make(label, value):
        def impl(server, request):
            asked.append(label)
            return value

        return impl

    register(bare, "first", "kxen_credential_lookup", make("first", {"a": "1"}))
    register(bare, "second", "kxen_credential_lookup", make("second", {"b": "2"}))
    assert await acall_first(bare, "kxen_credential_lookup", server=SERVER, request=None) == {"b": "2"}
    assert asked == ["second"]


async def test_acall_first_none_when_nobody_answers(bare):
    async def nothing(server, request):
        return None

    register(bare, "n", "kxen_credential_lookup", nothing)
    assert await acall_first(bare, "kxen_credential_lookup", server=SERVER, request=None) is None
    assert await acall_first(bare, "kxen_approval_prompt", request=None) is None


async def test_tryfirst_and_trylast_are_honoured(bare):
    def answer(label):
        async def impl(server, request):
            return {"from": label}

        return impl

    register(bare, "late", "kxen_credential_lookup", answer("late"), trylast=True)
    register(bare, "early", "kxen_credential_lookup", answer("early"), tryfirst=True)
    register(bare, "plain1", "kxen_credential_lookup", answer("plain1"))
    register(bare, "plain2", "kxen_credential_lookup", answer("plain2"))
    assert await acall_first(bare, "kxen_credential_lookup", server=SERVER, request=None) == {"from": "early"}
    order = [name for name, _ in await acall_all(bare, "kxen_credential_lookup", server=SERVER, request=None)]
    assert order == ["early", "plain2", "plain1", "late"]  # pluggy's order: LIFO within a class


async def test_impl_may_take_a_subset_of_the_arguments(bare):
    def only_server(server):
        return {"server": server.name}

    register(bare, "sub", "kxen_credential_lookup", only_server)
    assert await acall_first(bare, "kxen_credential_lookup", server=SERVER, request=object()) == {"server": "srv"}


async def test_acall_all_names_the_plugin_that_raised(bare):
    async def fine(call):
        return "vote"

    async def broken(call):
        raise KeyError("oops")

    register(bare, "fine-plugin", "kxen_policy_decision", fine)
    register(bare, "broken-plugin", "kxen_policy_decision", broken)
    with pytest.raises(PluginHookError) as info:
        await acall_all(bare, "kxen_policy_decision", call=None)
    assert info.value.plugin == "broken-plugin"
    assert info.value.hook == "kxen_policy_decision"
    assert isinstance(info.value.__cause__, KeyError)
    assert "broken-plugin" in str(info.value)


async def test_acall_first_names_the_plugin_that_raised_synchronously(bare):
    def broken(server, request):
        raise RuntimeError("sync failure")

    register(bare, "sync-broken", "kxen_credential_lookup", broken)
    with pytest.raises(PluginHookError) as info:
        await acall_first(bare, "kxen_credential_lookup", server=SERVER, request=None)
    assert info.value.plugin == "sync-broken"
    assert isinstance(info.value.__cause__, RuntimeError)


async def test_acall_all_on_error_stands_in_for_the_answer(bare):
    async def fine(call):
        return "yes"

    def broken(call):
        raise RuntimeError("x")

    register(bare, "fine", "kxen_policy_decision", fine)
    register(bare, "broken", "kxen_policy_decision", broken)
    errors: list[PluginHookError] = []

    def on_error(err):
        errors.append(err)
        return f"deny:{err.plugin}"

    answers = await acall_all(bare, "kxen_policy_decision", call=None, on_error=on_error)
    assert answers == [("broken", "deny:broken"), ("fine", "yes")]
    assert [e.plugin for e in errors] == ["broken"]


async def test_acall_all_skips_none_answers(bare):
    register(bare, "abstain", "kxen_catalog_page", lambda server, kind, page: None)
    register(bare, "judge", "kxen_catalog_page", lambda server, kind, page: ["v"])
    assert await acall_all(bare, "kxen_catalog_page", server=SERVER, kind="tools", page=None) == [("judge", ["v"])]


@pytest.mark.parametrize("hook", ["kxen_register_transports", "kxen_transport_closed", "kxen_nope"])
async def test_helpers_refuse_hooks_that_are_not_async_capable(bare, hook):
    with pytest.raises(ValueError):
        await acall_first(bare, hook, server=SERVER, context=None)
    with pytest.raises(ValueError):
        await acall_all(bare, hook, server=SERVER, context=None)


# --- the registry of transport kinds ----------------------------------------------------------


def test_a_kind_claimed_by_two_plugins_is_a_failure_naming_both(entry_points):
    entry_points += [
        FakeEntryPoint("one", transport_plugin("one", "stdio"), dist="kxen-one"),
        FakeEntryPoint("two", transport_plugin("two", "stdio"), dist="kxen-two"),
        FakeEntryPoint("ok", transport_plugin("ok", "ok"), dist="kxen-ok"),
    ]
    pm = make_plugin_manager()
    assert pm.transports.get("stdio") is None  # neither serves it: fail closed
    assert pm.transports.get("ok") is not None
    assert "kxen-two[two]" in failure(pm, "one").error and "'stdio'" in failure(pm, "one").error
    assert "kxen-one[one]" in failure(pm, "two").error
    rule = pm.transports.unknown_rule("stdio", pm.broken())
    assert "claimed by more than one plugin (kxen-one[one], kxen-two[two])" in rule


@pytest.mark.parametrize(
    "register_call, message",
    [
        (lambda r: r("Bad Kind", lambda s, c: None), "transport kind names are"),
        (lambda r: r("ok", "not callable"), "is not callable"),
        (lambda r: r("ok", lambda s, c: None, options=dict), "must be an attrs class"),
        (lambda r: (r("ok", lambda s, c: None), r("ok", lambda s, c: None)), "registered twice"),
        (lambda r: 1 / 0, "ZeroDivisionError"),
    ],
)
def test_a_broken_registration_loses_only_that_plugins_kinds(entry_points, register_call, message):
    @hookimpl
    def kxen_register_transports(register):
        register("mine", lambda s, c: None)
        register_call(register)

    entry_points += [
        FakeEntryPoint("bad", module("bad", kxen_register_transports=kxen_register_transports), dist="kxen-bad"),
        FakeEntryPoint("good", transport_plugin("good", "good"), dist="kxen-good"),
    ]
    pm = make_plugin_manager()
    assert pm.transports.names() == ["good"]
    assert message in failure(pm, "bad").error and "kxen_register_transports" in failure(pm, "bad").error


def test_the_registry_follows_plugins_registered_later(pm):
    assert pm.transports.get("late") is None
    pm.register(transport_plugin("late", "late"), name="late")
    assert pm.transports.get("late").plugin == "late"
    pm.unregister(name="late")
    assert pm.transports.get("late") is None


# --- hardening: what a hostile distribution can try at load -----------------------------------


@pytest.mark.parametrize("error", [SystemExit(7), SystemExit("bye"), KeyboardInterrupt(), GeneratorExit()])
def test_system_exit_or_keyboard_interrupt_at_import_is_a_load_failure(entry_points, error):
    entry_points += [
        FakeEntryPoint("bad", error, dist="kxen-bad"),
        FakeEntryPoint("good", transport_plugin("g", "g"), dist="d"),
    ]
    pm = make_plugin_manager()  # does not raise
    assert loaded_names(pm) == {"good"}
    f = failure(pm, "bad")
    assert f.dist == "kxen-bad" and type(error).__name__ in f.error and not f.skipped


@pytest.mark.parametrize("error", [SystemExit(7), KeyboardInterrupt()])
def test_system_exit_in_a_registration_loses_only_that_plugins_kinds(entry_points, error):
    @hookimpl
    def kxen_register_transports(register):
        raise error

    entry_points += [
        FakeEntryPoint("bad", module("bad", kxen_register_transports=kxen_register_transports), dist="kxen-bad"),
        FakeEntryPoint("good", transport_plugin("good", "good"), dist="kxen-good"),
    ]
    pm = make_plugin_manager()
    assert pm.transports.names() == ["good"]
    assert type(error).__name__ in failure(pm, "bad").error


def test_a_dist_claiming_the_stdio_name_takes_it_from_nobody_in_either_order(entry_points):
    for order in (("kxen-transport-stdio", "aaa-evil"), ("aaa-evil", "kxen-transport-stdio")):
        entry_points.clear()
        entry_points += [FakeEntryPoint("stdio", transport_plugin(d, "stdio"), dist=d) for d in order]
        pm = make_plugin_manager()
        assert loaded_names(pm) == set() and pm.transports.get("stdio") is None
        errors = {f.dist: f.error for f in pm.failures if f.entry_point == "stdio"}
        assert (
            "aaa-evil[stdio]" in errors["kxen-transport-stdio"] and "kxen-transport-stdio[stdio]" in errors["aaa-evil"]
        )


def test_blocking_one_claimant_of_a_name_lets_the_other_load(entry_points, monkeypatch):
    entry_points += [
        FakeEntryPoint("stdio", transport_plugin("real", "stdio"), dist="kxen-transport-stdio"),
        FakeEntryPoint("stdio", transport_plugin("evil", "stdio"), dist="evil"),
    ]
    monkeypatch.setenv("KXEN_DISABLE_PLUGINS", "evil")
    pm = make_plugin_manager()
    assert loaded_names(pm) == {"stdio"}
    assert {p.dist for p in pm.infos() if p.name == "stdio"} == {"kxen-transport-stdio"}
    assert not [f for f in pm.failures if not f.skipped]


def _fake_dist_info(folder, name: str = "evil_plugin") -> Any:
    """A real ``*.dist-info`` with a ``kxen`` entry point whose module writes a file when imported."""
    from pathlib import Path

    folder = Path(folder)
    info = folder / f"{name}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[kxen]\n{name} = {name}_mod\n")
    (folder / f"{name}_mod.py").write_text("import pathlib\npathlib.Path('IMPORTED').write_text('x')\n")
    return folder


def test_search_path_drops_the_cwd_and_relative_entries(tmp_path, monkeypatch):
    import os

    other = tmp_path / "other"
    other.mkdir()
    link = tmp_path / "link"
    link.symlink_to(tmp_path)
    monkeypatch.chdir(tmp_path)
    path = ["", ".", "sub", str(tmp_path), str(tmp_path) + "/", str(link), str(other), 3, f"{other}/../"]
    assert plugins_mod.search_path(path) == [str(other)]
    assert os.getcwd() not in plugins_mod.search_path()


def test_a_dist_info_in_the_cwd_is_not_a_plugin(tmp_path, monkeypatch):
    repo = _fake_dist_info(tmp_path / "repo")
    monkeypatch.chdir(repo)
    for entry in ("", ".", str(repo)):
        monkeypatch.setattr("sys.path", [entry, *__import__("sys").path])
        assert "evil_plugin" not in {d.ep.name for d in plugins_mod.discover()}
    # the same folder elsewhere on sys.path is found: the fake dist-info itself is sound
    monkeypatch.chdir(tmp_path)
    assert "evil_plugin" in {d.ep.name for d in plugins_mod.discover()}


def test_an_embedding_host_run_from_a_repository_does_not_import_its_dist_info(tmp_path):
    import subprocess
    import sys

    repo = _fake_dist_info(tmp_path / "repo")
    script = (
        "import sys\n"
        "from kxen_core.plugins.manager import make_plugin_manager\n"
        "pm = make_plugin_manager()\n"
        "print(sorted(p.name for p in pm.infos()), [f.entry_point for f in pm.failures])\n"
    )
    for argv in ([sys.executable, "-c", script], [sys.executable, "-m", "host"]):
        (repo / "host.py").write_text(script)
        proc = subprocess.run(argv, cwd=repo, capture_output=True, text=True, timeout=60, check=False)
        assert proc.returncode == 0, proc.stderr
        assert "evil_plugin" not in proc.stdout
        assert not (repo / "IMPORTED").exists()


def test_a_distribution_found_twice_on_the_path_counts_once(tmp_path, monkeypatch):
    import sys

    first = _fake_dist_info(tmp_path / "a")
    second = _fake_dist_info(tmp_path / "b")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [str(first), str(second), *sys.path])
    found = [d for d in plugins_mod.discover() if d.ep.name == "evil_plugin"]
    assert len(found) == 1


def test_unreadable_metadata_or_entry_points_are_load_failures_not_a_crash(tmp_path, monkeypatch):
    import sys

    bad = tmp_path / "bad-1.0.dist-info"
    bad.mkdir()
    (bad / "METADATA").write_bytes(b"Metadata-Version: 2.1\nName: \xff\xfe\n")
    (bad / "entry_points.txt").write_text("[kxen]\nbad_meta = no_such_module_h9\n")
    worse = tmp_path / "worse-1.0.dist-info"
    worse.mkdir()
    (worse / "entry_points.txt").write_bytes(b"\xff[kxen\nworse = x\n")
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    monkeypatch.setenv("KXEN_DISABLE_PLUGINS", "something")  # dist names are read for the blocklist
    monkeypatch.delenv("KXEN_LOAD_PLUGINS", raising=False)
    pm = make_plugin_manager()  # does not raise
    errors = {(f.dist, f.entry_point): f.error for f in pm.failures if not f.skipped}
    assert "unreadable entry points" in errors[("worse", "?")]
    assert "no_such_module_h9" in errors[(None, "bad_meta")]
    assert "bad_meta" in " ".join(pm.broken())


def test_an_entry_point_named_like_a_default_plugin_does_not_replace_it(entry_points):
    from kxen_core.policy import defaults

    name = next(iter(defaults.DEFAULT_PLUGINS))
    entry_points += [FakeEntryPoint(name, transport_plugin("evil", "evil"), dist="evil")]
    pm = make_plugin_manager()
    assert pm.get_plugin(name) is defaults.DEFAULT_PLUGINS[name]
    f = failure(pm, name)
    assert f.dist == "evil" and "already taken" in f.error
    assert entry_points[0].loads == 0


async def test_a_hook_raising_system_exit_while_called_is_that_plugins_failure(bare):
    """sys.exit() inside a per-call hook is a PluginHookError naming the plugin, never the host's exit."""

    def exits(call):
        raise SystemExit(7)

    register(bare, "quitter", "kxen_policy_decision", exits)
    with pytest.raises(PluginHookError) as info:
        await acall_first(bare, "kxen_policy_decision", call=None)
    assert info.value.plugin == "quitter" and "SystemExit" in str(info.value)
    answers = await acall_all(bare, "kxen_policy_decision", call=None, on_error=lambda err: f"deny:{err.plugin}")
    assert answers == [("quitter", "deny:quitter")]
