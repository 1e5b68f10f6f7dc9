"""Ranking tools for a query: SQLite's full-text search (FTS5) and its BM25 over what a model
would search a tool by.

Each tool is one row of four columns: the words of its ``qualifiedName`` (split at ``_``, ``-``,
``.``, ``/`` and camel case: ``listDirectory`` is ``list directory``), its ``title``, its input
parameters' names (split the same way), and its ``description`` with the parameters'
descriptions. FTS5 ranks with BM25 (``bm25()``), the columns weighted 3, 2, 2 and 1: a query word
that names the tool outweighs one its description mentions in passing. Its ``porter`` tokenizer
lower-cases and stems words the same way in tools and queries (``files`` and ``file`` match). A
query's function words (``the``, ``to``, ``please``...) are not searched for: they would match
nearly every tool and rank none. A query is the OR of its words, each quoted, so nothing in a query
is FTS5 syntax.

SQLite (with FTS5, as Python's own builds and the common distributions ship it) is in the standard
library: no dependency, and the index of 10,000 tools is built and searched in C (figures:
docs/config.md, "Tool search"). :func:`available` says whether this Python's SQLite has FTS5;
without it tool search stays off and every tool is listed. Everything is bounded: the query's
characters (:data:`MAX_QUERY_CHARS`) and words (:data:`MAX_QUERY_WORDS`), what is taken from one
tool (:data:`MAX_FIELD_CHARS`, :data:`MAX_PARAMS`), and the results (:data:`MAX_RESULTS`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

#: the longest query searched (characters); a longer one is an error, not cut
MAX_QUERY_CHARS = 500
#: the most distinct words of a query that are ranked on
MAX_QUERY_WORDS = 32
#: the most characters taken from one text of a tool (a huge description cannot crowd the index)
MAX_FIELD_CHARS = 16000
#: the most results one search returns
MAX_RESULTS = 20
#: the results of a search when none is asked for
DEFAULT_RESULTS = 5
#: the most parameters of one tool whose names and descriptions are indexed
MAX_PARAMS = 100
#: the BM25 weights of the columns: name, title, parameter names, descriptions
WEIGHTS = (3.0, 2.0, 2.0, 1.0)

#: words a query says that find nothing by themselves
_STOP = frozenset(
    "a an and are as at be by for from how i in into is it me my of on or please that the this to "
    "use using want what when which with you your can do does some".split()
)
# a boundary between words inside a name: lower->Upper, letters->digits, ACRONYMWord
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])|(?<=[A-Za-z])(?=[0-9])|(?<=[0-9])(?=[A-Za-z])")
_WORD = re.compile(r"[A-Za-z0-9]+")
_SEARCH = ("SELECT rowid, bm25(tools, {}) AS rank FROM tools WHERE tools MATCH ? ORDER BY rank, rowid LIMIT ?").format(
    ", ".join(map(str, WEIGHTS))
)


@functools.lru_cache(maxsize=1)
def available() -> str | None:
    """None when this Python's SQLite has FTS5; else why tool search cannot run."""
    try:
        import sqlite3

        sqlite3.connect(":memory:").execute("CREATE VIRTUAL TABLE probe USING fts5(x)")
    except Exception as exc:  # ImportError (a Python built without sqlite3), OperationalError (no fts5)
        return f"this Python's SQLite has no full-text search (FTS5): {type(exc).__name__}: {exc}"
    return None


@functools.lru_cache(maxsize=65536)
def _split(raw: str) -> str:
    """One alphanumeric run as words (a bounded cache: catalogs repeat their names)."""
    return " ".join(p for p in _CAMEL.split(raw) if p)


def words(text: str, limit: int = MAX_FIELD_CHARS) -> str:
    """``text`` as words for the index: split at non-alphanumerics and camel case, at most
    ``limit`` characters of it read."""
    return " ".join(_split(raw[:64]) for raw in _WORD.findall(text[:limit]))


def document(entry: Mapping[str, Any]) -> tuple[str, str, str, str]:
    """The four columns one tool entry (a ``Runtime.tools()`` entry) is found by."""
    name = entry.get("qualifiedName") or entry.get("name")
    title = entry.get("title")
    description = entry.get("description")
    params: list[str] = []
    texts = [description[:MAX_FIELD_CHARS] if isinstance(description, str) else ""]
    schema = entry.get("inputSchema")
    props = schema.get("properties") if isinstance(schema, Mapping) else None
    if isinstance(props, Mapping):
        for i, (param, spec) in enumerate(props.items()):
            if i >= MAX_PARAMS:
                break
            params.append(words(str(param), 200))
            text = spec.get("description") if isinstance(spec, Mapping) else None
            if isinstance(text, str):
                texts.append(text[:2000])
    return (
        words(name, 256) if isinstance(name, str) else "",
        title[:1000] if isinstance(title, str) else "",
        " ".join(params),
        "\n".join(texts),
    )


def query_words(query: str) -> list[str]:
    """The distinct words a query is ranked on (lower-cased; FTS5 stems them). Raises
    ``ValueError`` for a query that is not a string, is longer than :data:`MAX_QUERY_CHARS`, or has
    no word to search for."""
    if not isinstance(query, str):
        raise ValueError(f"the query must be a string (got {type(query).__name__})")
    if len(query) > MAX_QUERY_CHARS:
        raise ValueError(f"the query is {len(query)} characters; at most {MAX_QUERY_CHARS}")
    split = (w.lower() for raw in _WORD.findall(query) for w in _split(raw[:64]).split())
    found = list(dict.fromkeys(w for w in split if w not in _STOP))[:MAX_QUERY_WORDS]
    if not found:
        raise ValueError("the query has no word to search for (letters or digits, not only words like 'the')")
    return found


class ToolIndex:
    """BM25 over a list of tool entries, in an in-memory SQLite FTS5 table. ``search`` returns
    positions in that list. Raises ``RuntimeError`` when SQLite has no FTS5 (:func:`available`)."""

    def __init__(self, entries: Sequence[Mapping[str, Any]]) -> None:
        why = available()
        if why is not None:
            raise RuntimeError(why)
        import sqlite3

        self.size = len(entries)
        # the event loop's thread builds and searches it; a host may hand the runtime to another
        self._db = sqlite3.connect(":memory:", check_same_thread=False)
        self._db.execute(
            "CREATE VIRTUAL TABLE tools USING fts5(name, title, params, text, tokenize = 'porter unicode61')"
        )
        rows = ((i, *document(entry)) for i, entry in enumerate(entries))
        self._db.executemany("INSERT INTO tools(rowid, name, title, params, text) VALUES (?, ?, ?, ?, ?)", rows)

    def search(self, query: str, limit: int) -> list[tuple[int, float]]:
        """The best ``limit`` (1..:data:`MAX_RESULTS`) documents for ``query`` as ``(position,
        score)``, best first (a higher score is a better match); ties by position. Only documents
        sharing a word with the query are returned. Raises ``ValueError`` as :func:`query_words`
        does, or for a bad ``limit``."""
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_RESULTS:
            raise ValueError(f"limit must be an integer between 1 and {MAX_RESULTS}")
        match = " OR ".join(f'"{word}"' for word in query_words(query))  # alphanumeric: nothing to escape
        rows = self._db.execute(_SEARCH, (match, limit)).fetchall()
        return [(int(rowid), -float(rank)) for rowid, rank in rows]  # FTS5's bm25(): lower is better


class IndexCache:
    """One :class:`ToolIndex`, built again only when the key it was built for changes. The key
    is a tuple of objects compared by identity (the catalogs and views the tool list is made
    from, which are replaced, never changed in place), so a check costs no hashing."""

    def __init__(self) -> None:
        self._key: tuple[Any, ...] | None = None
        self._value: tuple[ToolIndex, list[dict[str, Any]]] | None = None
        self.builds = 0

    def get(
        self, key: tuple[Any, ...], entries: Callable[[], list[dict[str, Any]]]
    ) -> tuple[ToolIndex, list[dict[str, Any]]]:
        """The index and the entries it was built over, for ``key``; ``entries()`` is called only
        when the index is built again."""
        held = self._key
        if (
            self._value is None
            or held is None
            or len(held) != len(key)
            or any(a is not b for a, b in zip(held, key, strict=True))
        ):
            listed = entries()
            self._value, self._key = (ToolIndex(listed), listed), key
            self.builds += 1
        return self._value


__all__ = [
    "DEFAULT_RESULTS",
    "MAX_QUERY_CHARS",
    "MAX_QUERY_WORDS",
    "MAX_RESULTS",
    "IndexCache",
    "ToolIndex",
    "available",
    "document",
    "query_words",
    "words",
]
