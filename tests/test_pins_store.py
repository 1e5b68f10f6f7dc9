"""The pin store and the pins' digests on their own: canonical digests (a hypothesis property over
JSON re-encodings), the merge of a listing, the file's rules (0600, 0700, atomic, versioned,
bounded), and two processes pinning at once losing nothing."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kxen_core.policy import pins
from kxen_core.policy.pin_store import FILE_NAME, MAX_SERVERS, PinStore, PinStoreError

ROOT = Path(__file__).resolve().parents[1]

json_scalars = st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.text(max_size=20)
json_values = st.recursive(
    json_scalars | st.floats(allow_nan=False, allow_infinity=False, width=32),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
definitions = st.fixed_dictionaries(
    {"name": st.text(min_size=1, max_size=20), "inputSchema": st.dictionaries(st.text(max_size=8), json_values)},
    optional={
        "title": st.text(max_size=20),
        "description": st.text(max_size=200),
        "outputSchema": st.dictionaries(st.text(max_size=8), json_values, max_size=3),
        "annotations": st.dictionaries(st.text(max_size=12), json_values, max_size=3),
        "execution": st.dictionaries(st.text(max_size=12), json_values, max_size=2),
    },
)


def _shuffled(value: Any, rnd: Any) -> Any:
    if isinstance(value, dict):
        keys = list(value)
        rnd.shuffle(keys)
        return {k: _shuffled(value[k], rnd) for k in keys}
    if isinstance(value, list):
        return [_shuffled(v, rnd) for v in value]
    return value


def _floats(value: Any) -> Any:
    """What another encoder may write: every int as a float with the same value."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return float(value)
    if isinstance(value, dict):
        return {k: _floats(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_floats(v) for v in value]
    return value


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    tool=definitions,
    meta=json_values,
    indent=st.sampled_from([None, 0, 1, 2, 4, "\t"]),
    ascii_only=st.booleans(),
    separators=st.sampled_from([None, (",", ":"), (", ", ": "), (" ,", " : ")]),
    as_floats=st.booleans(),
    rnd=st.randoms(use_true_random=False),
)
def test_a_digest_never_depends_on_key_order_whitespace_or_number_spelling(
    tool, meta, indent, ascii_only, separators, as_floats, rnd
):
    """The definition as one server wrote it, and as it reads after any re-encoding (keys in another
    order, other whitespace, escapes, ``1.0`` for ``1``, a different ``_meta``): one digest."""
    wire = json.dumps(tool)
    shuffled = _shuffled(_floats(tool) if as_floats else tool, rnd)
    again = json.dumps(shuffled, indent=indent, ensure_ascii=ascii_only, separators=separators)
    listed = {**json.loads(again), "_meta": meta}
    assert pins.tool_digest(json.loads(wire)) == pins.tool_digest(listed)
    # the runtime's one-pass digest of a listing is the same digest
    assert pins.listing_of({"t": listed})["t"][0] == pins.tool_digest(listed)


@settings(max_examples=100, deadline=None)
@given(tool=definitions, key=st.sampled_from(pins.DEFINITION_KEYS), value=st.text(min_size=1, max_size=20))
def test_a_digest_changes_with_any_part_of_the_definition(tool, key, value):
    changed = {**tool, key: (tool.get(key, "") if isinstance(tool.get(key), str) else "") + value}
    assert pins.tool_digest(tool) != pins.tool_digest(changed)


def listing(**descriptions: str) -> dict[str, tuple[str, dict[str, Any], int]]:
    return pins.listing_of({n: {"name": n, "description": d} for n, d in descriptions.items()})


def merge(doc: dict[str, Any], mode: str = "hold", fresh: bool = False, **descriptions: str) -> pins.Merged:
    return pins.merge(
        doc,
        "k",
        identity={"scope": "user", "kind": "stdio", "launch": "l"},
        server="s",
        listing=listing(**descriptions),
        mode=mode,
        fresh_session=fresh,
        stamp=1000,
    )


def test_the_merge_pins_first_then_holds_what_changed_or_is_new():
    doc: dict[str, Any] = {"version": 1, "servers": {}}
    first = merge(doc, a="A", b="B")
    assert (first.states, first.fresh, first.changed) == ({"a": "first", "b": "first"}, True, True)
    same = merge(doc, a="A", b="B")
    assert same.states == {"a": "pinned", "b": "pinned"} and not same.changed  # nothing to write
    later = merge(doc, a="A2", b="B", c="C")
    assert later.states == {"a": "changed", "b": "pinned", "c": "new"} and later.fields["a"] == ("description",)
    assert set(doc["servers"]["k"]["pending"]) == {"a", "c"} and doc["servers"]["k"]["tools"]["a"]["digest"]
    assert not merge(doc, a="A2", b="B", c="C").changed  # still waiting: no write
    assert pins.accept(doc, "k", ["a"], None, 2000) == ["a"]
    assert merge(doc, a="A2", b="B", c="C").states == {"a": "pinned", "b": "pinned", "c": "new"}
    assert merge(doc, mode="warn", a="A2", b="B", c="C", d="D").states["d"] == "added"
    assert merge(doc, fresh=True, e="E").states == {"e": "first"}  # the first session pins what it adds


def test_a_server_that_reverts_is_pinned_again_and_nothing_waits():
    doc: dict[str, Any] = {"version": 1, "servers": {}}
    merge(doc, a="A")
    merge(doc, a="evil")
    assert merge(doc, a="A").states == {"a": "pinned"} and doc["servers"]["k"]["pending"] == {}


def test_the_file_is_private_atomic_and_versioned(tmp_path):
    store = PinStore(tmp_path / "data")
    store.update_if(lambda doc: (True, merge(doc, a="A")))
    path = tmp_path / "data" / FILE_NAME
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "data").stat().st_mode) == 0o700
    assert json.loads(path.read_text())["version"] == 1
    (tmp_path / "data" / ".tool-pins.leftover.tmp").write_text("half")  # a killed writer's
    store.update_if(lambda doc: (True, merge(doc, a="A", b="B")))
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == [FILE_NAME, FILE_NAME + ".lock"]
    assert stat.S_IMODE((tmp_path / "data" / (FILE_NAME + ".lock")).stat().st_mode) == 0o600


@pytest.mark.parametrize(
    "content, said",
    [
        (b'{"version": 7, "servers": {}}', "version 7 is not one this kxen knows (1): refused"),
        (b"\xff\xfe", "not a JSON object"),
        (b"[1, 2]", "not a JSON object"),
        (b'{"servers": {}}', "version None is not one this kxen knows"),
        (b'{"version": 1, "servers": {"k": 3}}', "'servers' must be an object of objects"),
    ],
)
def test_a_file_kxen_cannot_use_is_an_error_naming_it_and_is_never_rewritten(tmp_path, content, said):
    path = tmp_path / FILE_NAME
    path.write_bytes(content)
    os.chmod(path, 0o600)
    store = PinStore(tmp_path)
    with pytest.raises(PinStoreError) as info:
        store.document()
    assert str(path) in str(info.value) and said in str(info.value)
    with pytest.raises(PinStoreError):
        store.update_if(lambda doc: (True, None))
    assert path.read_bytes() == content


def test_a_directory_others_can_write_or_a_file_too_large_is_refused(tmp_path, monkeypatch):
    from kxen_core.policy import pin_store

    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    with pytest.raises(PinStoreError, match="can be written by others"):
        PinStore(shared).document()
    os.chmod(shared, 0o700)
    monkeypatch.setattr(pin_store, "MAX_FILE_BYTES", 100)
    (shared / FILE_NAME).write_text(json.dumps({"version": 1, "servers": {"k": {"x": "y" * 200}}}))
    with pytest.raises(PinStoreError, match="larger than 100 bytes"):
        PinStore(shared).document()


def test_the_store_keeps_at_most_its_bound_of_identities(tmp_path):
    store = PinStore(tmp_path)

    def fill(doc: dict[str, Any]) -> tuple[bool, None]:
        for i in range(MAX_SERVERS + 5):
            doc["servers"][f"id{i}"] = {"server": "s", "seen": i, "tools": {}, "pending": {}}
        return True, None

    store.update_if(fill)
    kept = store.document()["servers"]
    assert len(kept) == MAX_SERVERS and "id0" not in kept and f"id{MAX_SERVERS + 4}" in kept


WRITER = textwrap.dedent(
    """
    import sys
    import time
    from pathlib import Path
    from kxen_core.policy import pins
    from kxen_core.policy.pin_store import PinStore

    store, who, rounds = PinStore(Path(sys.argv[1])), sys.argv[2], int(sys.argv[3])
    Path(sys.argv[4]).touch()  # ready
    while not Path(sys.argv[5]).exists():
        time.sleep(0.001)
    for i in range(rounds):
        listing = pins.listing_of({f"{who}{j}": {"name": f"{who}{j}"} for j in range(i + 1)})

        def change(doc):
            done = pins.merge(doc, "same", identity={"scope": "user"}, server="s", listing=listing,
                              mode="warn", fresh_session=True, stamp=1)
            return done.changed, done

        store.update_if(change)
    """
)


def test_two_processes_pinning_the_same_server_at_once_lose_nothing(tmp_path):
    """Two processes add tools to one identity's pins, each under the lock, as fast as they can:
    every tool of both ends up pinned."""
    data, go, rounds = tmp_path / "data", tmp_path / "go", 40
    procs, ready = [], []
    for who in ("a", "b"):
        flag = tmp_path / f"ready-{who}"
        ready.append(flag)
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", WRITER, str(data), who, str(rounds), str(flag), str(go)],
                cwd=ROOT,
                stderr=subprocess.PIPE,
            )
        )
    deadline = 60
    start = time.monotonic()
    while not all(f.exists() for f in ready):
        assert time.monotonic() - start < deadline, "the writers did not start"
        time.sleep(0.01)
    go.touch()
    for proc in procs:
        _, err = proc.communicate(timeout=deadline)
        assert proc.returncode == 0, err.decode()
    tools = PinStore(data).document()["servers"]["same"]["tools"]
    assert set(tools) == {f"{who}{j}" for who in "ab" for j in range(rounds)}


def test_a_server_that_keeps_renaming_its_tools_cannot_grow_its_pins(monkeypatch):
    monkeypatch.setattr(pins, "MAX_TOOLS", 5)
    doc: dict[str, Any] = {"version": 1, "servers": {}}
    merge(doc, fresh=True, a="A")
    for round_ in range(4):
        names = {f"t{round_}_{i}": "x" for i in range(3)}
        merge(doc, mode="hold", a="A", **names)  # new tools each time: they wait
        merge(doc, mode="warn", a="A", **{f"w{round_}_{i}": "x" for i in range(3)})  # pinned at once
    entry = doc["servers"]["k"]
    assert len(entry["tools"]) == 5 and "a" in entry["tools"]  # what is listed stays
    assert len(entry["pending"]) == 5 and "t3_2" in entry["pending"]  # the newest stay


def test_definitions_are_kept_for_diffs_within_a_budget_and_digests_always(monkeypatch):
    monkeypatch.setattr(pins, "DEFINITIONS_BUDGET", 150)  # two of the three definitions
    doc: dict[str, Any] = {"version": 1, "servers": {}}
    merge(doc, fresh=True, a="A" * 40, b="B" * 40, c="C" * 40)
    records = doc["servers"]["k"]["tools"]
    assert [records[n]["definition"] is not None for n in "abc"] == [True, True, False]
    assert all(len(records[n]["digest"]) == 64 for n in "abc")
    merge(doc, c="changed")
    assert "pinned by its digest" in pins.diff("c", records["c"], doc["servers"]["k"]["pending"]["c"])


def test_a_store_over_its_bound_drops_diffs_then_the_oldest_servers(tmp_path, monkeypatch):
    from kxen_core.policy import pin_store

    store = PinStore(tmp_path)

    def fill(doc: dict[str, Any]) -> tuple[bool, None]:
        for i in range(4):
            record = {"digest": "d" * 64, "definition": {"description": "x" * 3000}, "size": 3000}
            doc["servers"][f"id{i}"] = {"server": f"s{i}", "seen": i, "tools": {"t": record}, "pending": {}}
        return True, None

    monkeypatch.setattr(pin_store, "MAX_FILE_BYTES", 4000)
    store.update_if(fill)
    kept = store.document()["servers"]
    assert set(kept) == {"id0", "id1", "id2", "id3"}
    assert all(e["tools"]["t"]["definition"] is None for e in kept.values())
    monkeypatch.setattr(pin_store, "MAX_FILE_BYTES", 300)
    smaller = PinStore(tmp_path / "smaller")
    smaller.update_if(fill)
    assert list(smaller.document()["servers"]) == ["id3"]  # the one listed last


def test_what_this_process_wrote_is_read_back_without_a_parse_and_another_writer_is_seen(tmp_path, monkeypatch):
    """After its own write a store reads the file back as one ``stat``: the document is the one
    written, equal to the file. A write by another object (another process) gives the file another
    inode, time or size: the next read parses it, and its pins are there."""
    data = tmp_path / "data"
    mine, other = PinStore(data), PinStore(data)
    parsed: list[int] = []
    real_parse = PinStore._parse
    monkeypatch.setattr(PinStore, "_parse", lambda self, raw: parsed.append(len(raw)) or real_parse(self, raw))
    mine.update_if(lambda doc: (True, merge(doc, a="A")))
    assert len(parsed) == 0  # nothing to parse yet: no file before the first write
    doc = mine.document()
    assert parsed == [] and doc == json.loads((data / FILE_NAME).read_bytes())
    assert merge(json.loads(json.dumps(doc)), a="A").states == {"a": "pinned"}
    # the other parses the file mine wrote, under the lock
    other.update_if(lambda doc: (True, merge(doc, mode="warn", a="A", b="B")))
    assert len(parsed) == 1
    seen = mine.document()
    assert len(parsed) == 2 and set(seen["servers"]["k"]["tools"]) == {"a", "b"}
    assert seen == json.loads((data / FILE_NAME).read_bytes())
    # the same size and content, written by hand (another inode): read again, not the cached one
    raw = (data / FILE_NAME).read_bytes().replace(b'"seen":1000', b'"seen":1001')
    (data / "x").write_bytes(raw)
    os.replace(data / "x", data / FILE_NAME)
    assert mine.document()["servers"]["k"]["seen"] == 1001 and len(parsed) == 3


def test_a_failed_write_keeps_no_document(tmp_path, monkeypatch):
    """A write that raises leaves no cache of what was not written: the next read is the file's."""
    store = PinStore(tmp_path)
    store.update_if(lambda doc: (True, merge(doc, a="A")))

    def broken(self: PinStore, doc: dict[str, Any]) -> None:
        raise PinStoreError("disk full")

    monkeypatch.setattr(PinStore, "_write", broken)
    with pytest.raises(PinStoreError):
        store.update_if(lambda doc: (True, merge(doc, a="A", b="B")))
    assert set(store.document()["servers"]["k"]["tools"]) == {"a"}


def test_the_cached_documents_are_bounded_one_per_store_and_at_most_max_stores(tmp_path):
    """A process keeps one document per store file (the last read or written) and at most
    ``MAX_STORES`` stores: the one used longest ago goes first."""
    from kxen_core.policy import pin_store as module

    made = [module.pin_store(tmp_path / f"d{i}") for i in range(module.MAX_STORES + 3)]
    for store in made[-2:]:
        store.update_if(lambda doc: (True, merge(doc, a="A")))
        store.update_if(lambda doc: (True, merge(doc, mode="warn", a="A", b="B")))
        assert set(store.document()["servers"]["k"]["tools"]) == {"a", "b"}  # one document, the last written
    kept = [p for p in module._STORES if p.parent == tmp_path]
    assert len(module._STORES) <= module.MAX_STORES and tmp_path / "d0" not in kept
    assert module.pin_store(made[-1].dir) is made[-1]
