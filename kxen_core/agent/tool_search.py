"""Ranking tools for a query: an Okapi BM25 index over what a model would search a tool by.

Each tool is one document made of the words of its ``qualifiedName`` (split at ``_``, ``-``,
``.``, ``/`` and camel case), its ``title``, its ``description``, and its input parameters'
names and descriptions. The name's words count three times, the title's and the parameter
names' twice (a fielded BM25 by repetition): a query word that names the tool outweighs one
that its description mentions in passing. Words are lower-cased, a few English function words
are dropped, and plural and verb endings are cut the same way in tools and queries
(``files`` and ``file`` match). A query's everyday verbs also search for the action a tool name
says (``send``, ``open``, ``add`` -> ``create``; :data:`ACTIONS`), at half weight.

Pure Python, no dependency: an inverted index of at most a few hundred thousand postings for
10,000 tools, built in well under a second and searched in about a millisecond (figures:
docs/config.md, "Tool search"). Everything is bounded: the query's characters
(:data:`MAX_QUERY_CHARS`) and words (:data:`MAX_QUERY_WORDS`), the words taken from one tool
(:data:`MAX_DOC_WORDS`), and the results (:data:`MAX_RESULTS`).
"""

from __future__ import annotations

import functools
import heapq
import math
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

#: the longest query searched (characters); a longer one is an error, not cut
MAX_QUERY_CHARS = 500
#: the most distinct words of a query that are ranked on
MAX_QUERY_WORDS = 32
#: the most words taken from one tool's definition (a huge description cannot crowd the index)
MAX_DOC_WORDS = 2000
#: the most results one search returns
MAX_RESULTS = 20
#: the results of a search when none is asked for
DEFAULT_RESULTS = 5
#: the most parameters of one tool whose names and descriptions are indexed
MAX_PARAMS = 100

K1 = 1.2
B = 0.75
NAME_WEIGHT, TITLE_WEIGHT, PARAM_NAME_WEIGHT = 3, 2, 2

_STOP = frozenset(
    "a an and are as at be by for from how i in into is it me my of on or please that the this to "
    "use using want what when which with you your can do does some".split()
)
#: what a person says for the actions tool names are made of (create, get, list, update, delete,
#: search, count, restore, export): a query word here also searches for its action, at
#: :data:`ACTION_WEIGHT` (the word itself is searched too: ``post`` is also a thing)
ACTIONS = {
    "add": "create", "new": "create", "make": "create", "open": "create", "write": "create",
    "send": "create", "post": "create", "upload": "create", "start": "create", "schedule": "create",
    "remove": "delete", "erase": "delete", "drop": "delete", "destroy": "delete", "cancel": "delete",
    "edit": "update", "change": "update", "rename": "update", "modify": "update", "set": "update",
    "fetch": "get", "read": "get", "look": "get", "show": "list", "find": "search", "lookup": "search",
    "undelete": "restore", "recover": "restore", "undo": "restore", "many": "count", "number": "count",
    "download": "export",
}  # fmt: skip
ACTION_WEIGHT = 0.5
# a boundary between words inside a name: lower->Upper, letters->digits, ACRONYMWord
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])|(?<=[A-Za-z])(?=[0-9])|(?<=[0-9])(?=[A-Za-z])")
_WORD = re.compile(r"[A-Za-z0-9]+")


def stem(word: str) -> str:
    """``word`` with a plural or verb ending cut (``files`` -> ``file``, ``queries`` -> ``query``,
    ``listing`` -> ``list``); short words stay as they are."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 5 and word.endswith("ing"):
        return word[:-3]
    if len(word) > 4 and word.endswith("ed") and not word.endswith("eed"):
        return word[:-2]
    if len(word) > 4 and word.endswith(("ches", "shes", "sses", "xes")):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


@functools.lru_cache(maxsize=65536)
def _token(raw: str) -> tuple[str, ...]:
    """The index words of one alphanumeric run (a bounded cache: catalogs repeat their words)."""
    parts = (raw,) if raw.islower() and raw.isalpha() else _CAMEL.split(raw)
    return tuple(stem(w) for w in (p.lower() for p in parts) if w and w not in _STOP)


def words(text: str, limit: int = MAX_DOC_WORDS) -> list[str]:
    """The index words of ``text``: split at non-alphanumerics and camel case, lower-cased,
    function words dropped, stemmed; at most ``limit``."""
    out = [w for raw in _WORD.findall(text[: limit * 16]) for w in _token(raw[:64])]
    return out[:limit] if len(out) > limit else out


def document(entry: Mapping[str, Any]) -> list[str]:
    """The words one tool entry (a ``Runtime.tools()`` entry) is found by, weighted by repetition."""
    out: list[str] = []
    name = entry.get("qualifiedName") or entry.get("name")
    if isinstance(name, str):
        out.extend(words(name, 64) * NAME_WEIGHT)
    title = entry.get("title")
    if isinstance(title, str):
        out.extend(words(title, 64) * TITLE_WEIGHT)
    description = entry.get("description")
    if isinstance(description, str):
        out.extend(words(description))
    schema = entry.get("inputSchema")
    props = schema.get("properties") if isinstance(schema, Mapping) else None
    if isinstance(props, Mapping):
        for i, (param, spec) in enumerate(props.items()):
            if i >= MAX_PARAMS or len(out) >= MAX_DOC_WORDS:
                break
            out.extend(words(str(param), 16) * PARAM_NAME_WEIGHT)
            text = spec.get("description") if isinstance(spec, Mapping) else None
            if isinstance(text, str):
                out.extend(words(text[:2000], 200))
    return out[:MAX_DOC_WORDS]


def query_words(query: str) -> list[str]:
    """The distinct words a query is ranked on. Raises ``ValueError`` for a query that is not a
    string, is longer than :data:`MAX_QUERY_CHARS`, or has no word to search for."""
    if not isinstance(query, str):
        raise ValueError(f"the query must be a string (got {type(query).__name__})")
    if len(query) > MAX_QUERY_CHARS:
        raise ValueError(f"the query is {len(query)} characters; at most {MAX_QUERY_CHARS}")
    found = list(dict.fromkeys(words(query, MAX_QUERY_WORDS * 4)))[:MAX_QUERY_WORDS]
    if not found:
        raise ValueError("the query has no word to search for (letters or digits, not only words like 'the')")
    return found


class ToolIndex:
    """BM25 over a list of tool entries. ``search`` returns positions in that list."""

    def __init__(self, entries: Sequence[Mapping[str, Any]]) -> None:
        self.size = len(entries)
        self.postings: dict[str, list[tuple[int, int]]] = {}
        lengths: list[int] = []
        for doc, entry in enumerate(entries):
            terms = document(entry)
            lengths.append(len(terms))
            for term, tf in Counter(terms).items():
                postings = self.postings.get(term)
                if postings is None:
                    self.postings[term] = [(doc, tf)]
                else:
                    postings.append((doc, tf))
        average = (sum(lengths) / len(lengths)) if lengths else 0.0
        # the length part of BM25's denominator, once per document
        self._norm = [K1 * (1 - B + B * n / average) if average else K1 for n in lengths]

    def idf(self, term: str) -> float:
        n = len(self.postings.get(term, ()))
        return math.log(1 + (self.size - n + 0.5) / (n + 0.5))

    def search(self, query: str, limit: int) -> list[tuple[int, float]]:
        """The best ``limit`` (1..:data:`MAX_RESULTS`) documents for ``query`` as ``(position,
        score)``, best first; ties by position. Only documents sharing a word with the query
        are returned. Raises ``ValueError`` as :func:`query_words` does, or for a bad ``limit``."""
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_RESULTS:
            raise ValueError(f"limit must be an integer between 1 and {MAX_RESULTS}")
        scores: dict[int, float] = {}
        norm = self._norm
        terms = {term: 1.0 for term in query_words(query)}
        for term in list(terms):
            action = ACTIONS.get(term)
            if action is not None and action not in terms:
                terms[action] = ACTION_WEIGHT
        for term, boost in terms.items():
            postings = self.postings.get(term)
            if not postings:
                continue
            weight = self.idf(term) * boost
            for doc, tf in postings:
                scores[doc] = scores.get(doc, 0.0) + weight * tf * (K1 + 1) / (tf + norm[doc])
        best = heapq.nsmallest(limit, scores.items(), key=lambda item: (-item[1], item[0]))
        return [(doc, score) for doc, score in best]


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
    "ACTIONS",
    "DEFAULT_RESULTS",
    "MAX_QUERY_CHARS",
    "MAX_QUERY_WORDS",
    "MAX_RESULTS",
    "IndexCache",
    "ToolIndex",
    "document",
    "query_words",
    "stem",
    "words",
]
