"""kxen_core.config.paths: the kernel's canonical paths equal the standard library's, on real trees."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kxen_core.config import paths


@pytest.fixture()
def tree(tmp_path: Path) -> Path:
    """dirs, files, relative and absolute links, a dangling link, a loop, a link to a dir."""
    root = tmp_path.resolve()
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "f.py").write_text("x")
    (root / "fifo").parent.mkdir(exist_ok=True)
    os.mkfifo(root / "fifo")
    os.symlink("a/b", root / "rel")
    os.symlink(root / "a" / "b" / "f.py", root / "abs")
    os.symlink("missing/x", root / "dangling")
    os.symlink("loop2", root / "loop1")
    os.symlink("loop1", root / "loop2")
    os.symlink("../..", root / "a" / "b" / "up")
    os.symlink("rel", root / "chain")
    return root


NAMES = ["a", "b", "f.py", "rel", "abs", "dangling", "loop1", "chain", "up", "fifo", "..", ".", "", "nope"]


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)  # read-only tree
@given(parts=st.lists(st.sampled_from(NAMES), min_size=0, max_size=6), trailing=st.booleans())
def test_real_and_resolved_equal_the_standard_library(tree: Path, parts: list[str], trailing: bool) -> None:
    path = str(tree) + "/" + "/".join(parts) + ("/" if trailing else "")
    assert paths.real(path) == os.path.realpath(path)
    try:
        expected: Path | type[BaseException] = Path(path).resolve()
    except (OSError, RuntimeError) as exc:  # a loop
        expected = type(exc)
    if isinstance(expected, Path):
        assert paths.resolved(path) == expected
    else:
        with pytest.raises(expected):
            paths.resolved(path)


def test_the_kernel_answers_for_an_existing_path(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    original = os.path.realpath
    monkeypatch.setattr(os.path, "realpath", lambda p, **kw: calls.append(p) or original(p, **kw))
    assert paths.real(str(tree / "chain" / "f.py")) == str(tree / "a" / "b" / "f.py")
    assert paths.real(str(tree / "fifo")) == str(tree / "fifo")  # O_PATH: the FIFO is not opened for reading
    assert calls == []  # no component-by-component walk
    assert paths.real(str(tree / "dangling")) == str(tree / "missing" / "x")  # left to the standard library
    assert calls == [str(tree / "dangling")]


def test_a_nul_byte_fails_as_the_standard_library_fails() -> None:
    with pytest.raises(ValueError):
        os.path.realpath("/tmp/a\0b")
    with pytest.raises(ValueError):
        paths.real("/tmp/a\0b")


@settings(max_examples=500, deadline=None)
@given(
    a=st.lists(st.sampled_from(["x", "y", "xy", "ws", "w"]), max_size=4),
    b=st.lists(st.sampled_from(["x", "y", "xy", "ws", "w"]), max_size=4),
)
def test_under_equals_the_component_comparison(a: list[str], b: list[str]) -> None:
    path, root = "/" + "/".join(a), "/" + "/".join(b)
    assert paths.under(path, root) == (os.path.commonpath([path, root]) == root)
