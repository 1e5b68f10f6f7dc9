"""kxen_core._dists: the entry points found as importlib.metadata finds them, without importing it.

Every test holds the light finder against the standard library's on the same path: the same
distributions in the same order, the same entry points, the same names, versions and errors.
"""

from __future__ import annotations

import importlib.metadata
import sys
import types
import zipfile
from pathlib import Path
from typing import Any

import pytest

from kxen_core import _dists, plugins


def rows(dists: Any) -> list[tuple[Any, ...]]:
    """What discovery reads of each distribution: its dedupe key, its entry points, its name and version."""
    out = []
    for d in dists:
        eps = [(e.group, e.name, e.value) for e in d.entry_points]
        out.append((plugins._dist_key(d), eps, d.metadata["Name"], d.version))
    return out


def both(path: list[str]) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    return rows(importlib.metadata.distributions(path=path)), rows(_dists.distributions(path=path))


def dist_info(folder: Path, dirname: str, name: str, version: str, entry_points: str | None) -> Path:
    info = folder / dirname
    info.mkdir(parents=True)
    (info / ("PKG-INFO" if dirname.endswith(("egg-info", "EGG-INFO")) else "METADATA")).write_text(
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    )
    if entry_points is not None:
        (info / "entry_points.txt").write_text(entry_points)
    return info


def test_the_installed_environment_is_found_alike():
    std, light = both(plugins.search_path())
    assert light == std
    kxen = {e.name for d in _dists.distributions(path=plugins.search_path()) for e in d.entry_points if e.group == "kxen"}
    assert {"memory", "stdio", "http", "sse"} <= kxen  # the workspace plugins are installed: the check is not empty


def test_a_folder_of_every_shape_is_found_alike(tmp_path):
    site = tmp_path / "site"
    text = "# a comment\nbefore = any_section\n[console_scripts]\ntool = tool.cli:main\n\n[kxen]\n  one = one_mod:plugin.inner [extra]\n"
    dist_info(site, "b_pkg-1.0.dist-info", "b-pkg", "1.0", text)
    dist_info(site, "a_pkg-1.0.dist-info", "a_pkg", "1.0", "[kxen]\nfirst = a\n")
    dist_info(site, "zeta-0.1.dist-info", "zeta", "0.1", None)  # no entry points at all
    dist_info(site, "A.Pkg-2.0.dist-info", "A.Pkg", "2.0", "[kxen]\nsecond = a2\n")  # the same name as a_pkg
    dist_info(site, "old-0.1.egg-info", "old", "0.1", "[kxen]\nlegacy = old_mod\n")
    dist_info(site, "UPPER-3.0.DIST-INFO", "Upper.Case", "3.0", "[kxen]\nloud = upper\n")  # named by its metadata
    (site / "file-1.0.dist-info").write_text("not a folder")
    dist_info(site / "thing-1.0-py3.11.egg", "EGG-INFO", "thing", "1.0", "[kxen]\negg = thing_mod\n")
    archive = tmp_path / "zipped.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("zipped-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: zipped\nVersion: 1.0\n")
        zf.writestr("zipped-1.0.dist-info/entry_points.txt", "[kxen]\nzipped = zipped_mod\n")
    path = [str(site), str(site / "thing-1.0-py3.11.egg"), str(archive), str(tmp_path / "missing"), str(site)]
    std, light = both(path)
    assert light == std
    names = [e[1] for _key, eps, _name, _version in light for e in eps if e[0] == "kxen"]
    assert {"one", "first", "second", "legacy", "loud", "egg", "zipped"} <= set(names)


def test_an_unreadable_entry_points_file_raises_as_the_standard_library_does(tmp_path):
    info = dist_info(tmp_path, "bad-1.0.dist-info", "bad", "1.0", None)
    (info / "entry_points.txt").write_bytes(b"\xff[kxen]\nworse = x\n")
    [std] = importlib.metadata.distributions(path=[str(tmp_path)])
    [light] = _dists.distributions(path=[str(tmp_path)])
    with pytest.raises(UnicodeDecodeError) as expected:
        std.entry_points
    with pytest.raises(UnicodeDecodeError) as got:
        light.entry_points
    assert str(got.value) == str(expected.value)
    # a line without "=" in a section: the standard library raises a TypeError about its own
    # tuple; the light finder a ValueError naming the line (both: that distribution's load failure)
    (info / "entry_points.txt").write_text("[console_scripts]\nno equals sign here\n")
    with pytest.raises(TypeError):
        std.entry_points
    with pytest.raises(ValueError, match=r"\[console_scripts\] 'no equals sign here' is not 'name = value'"):
        light.entry_points


def test_an_entry_point_loads_the_attribute_its_value_names(tmp_path, monkeypatch):
    (tmp_path / "ep_target_mod.py").write_text("class plugin:\n    inner = 'the inner one'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    dist = _dists.PathDist(str(tmp_path / "x-1.0.dist-info"))
    assert _dists.EntryPoint("a", "ep_target_mod:plugin.inner [extra]", "kxen", dist).load() == "the inner one"
    assert _dists.EntryPoint("b", "ep_target_mod", "kxen", dist).load() is sys.modules["ep_target_mod"]
    with pytest.raises(ValueError, match="'a b' is not 'module' or 'module:attribute'"):
        _dists.EntryPoint("c", "a b", "kxen", dist).load()


def test_another_finder_of_distributions_is_asked_through_the_standard_library(tmp_path, monkeypatch):
    dist_info(tmp_path, "plain-1.0.dist-info", "plain", "1.0", "[kxen]\nplain = plain_mod\n")
    extra = importlib.metadata.PathDistribution(dist_info(tmp_path / "elsewhere", "extra-1.0.dist-info", "extra", "1.0", "[kxen]\nextra = e\n"))
    finder = types.SimpleNamespace(find_spec=lambda *a, **k: None, find_distributions=lambda context=None: iter([extra]))
    monkeypatch.setattr(sys, "meta_path", [finder, *sys.meta_path])
    std, light = both([str(tmp_path)])
    assert light == std
    assert [r[2] for r in light] == ["extra", "plain"]
