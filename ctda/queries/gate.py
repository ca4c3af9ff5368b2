"""The query gate: whether a Cypher text may run, decided on its tokens by an allow-list.

Every query a user can type (``ctda query``, the UI's console, ``whatif --cypher``, the
library's ``Store.query``) passes :func:`check` before it reaches an engine. A regex over
the text cannot tell a keyword from the same letters inside a string or a comment, so the
text is tokenized first (strings with backslash escapes, backtick identifiers with doubled
backticks, ``//`` and ``/* */`` comments, ``;`` between statements); anything the
tokenizer cannot read with certainty (an unterminated string or comment, a character
outside ASCII that is not in a string, comment or backtick name) is refused.

Then every *clause* must be allow-listed. A clause starts at the beginning of a statement,
after ``UNION [ALL]``, and wherever a word follows a finished operand (a name, literal,
parameter, ``)``, ``]``, ``}``): in Cypher two operands never stand side by side, so such a
word is either an infix keyword (``AND``, ``IS``, ``AS``, ``STARTS WITH``, ...) or the
keyword of the next clause. Read clauses are ``MATCH``, ``OPTIONAL MATCH``, ``WITH``,
``UNWIND``, ``WHERE``, ``RETURN``, ``ORDER BY``, ``SKIP``, ``LIMIT``, ``UNION`` and
``CALL`` of a procedure on the backend's read list (``read_procedures``); anything
else (``LOAD``, ``COPY``, ``INSTALL``, ``ATTACH``, ``CHECKPOINT``, ``USE``, ``EXPORT``,
a configuration ``CALL x=1``, ``CALL {...}``, ...) is refused. Dotted function calls
(``apoc.*``) run procedures' code and are refused unless their namespace is a
built-in temporal one.

Levels: ``READ`` is that allow-list; ``WRITE`` (``ctda query --write``) adds the clauses
that change data or schema (``CREATE``, ``MERGE``, ``SET``, ``DELETE``, ``DETACH DELETE``,
``REMOVE``, ``DROP``, ``ALTER``, ``FOREACH``, ``CHECKPOINT``) but still no file, extension,
attach or configuration access and no other procedures; ``UNSAFE`` (``--write
--allow-files``) sends the text unchecked, for the owner of the machine.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from ctda.queries.errors import QueryError
from ctda.queries.shipped import shipped_reader


class Level(str, Enum):
    """What a query may do."""

    READ = "read"
    WRITE = "write"
    UNSAFE = "unsafe"


class GateError(QueryError):
    """A query the gate refuses (one line for the user)."""


class Engine(Protocol):
    """What the gate asks of a store backend (a :class:`ctda.store.contract.Engine` class
    or instance): the procedures a read query may ``CALL``, lower case, full dotted names."""

    @property
    def read_procedures(self) -> frozenset[str]: ...


#: namespaces of dotted functions a query may use (Neo4j's temporal constructors)
FUNCTION_NAMESPACES = frozenset({"date", "datetime", "localdatetime", "time", "localtime", "duration"})
#: pure dotted functions a read query may use, by full name (lower case): value conversions
#: that touch no file, network or configuration (the in-database what-if queries use them)
PURE_FUNCTIONS = frozenset({"apoc.convert.fromjsonlist", "apoc.convert.tojson", "apoc.map.frompairs"})

_READ_CLAUSES = frozenset(
    {
        "MATCH", "OPTIONAL", "WITH", "UNWIND", "WHERE", "RETURN", "ORDER", "SKIP", "LIMIT", "UNION",
        "CALL", "YIELD",
    }
)  # fmt: skip
_WRITE_CLAUSES = frozenset(
    {"CREATE", "MERGE", "SET", "DELETE", "DETACH", "REMOVE", "DROP", "ALTER", "FOREACH", "CHECKPOINT", "ON"}
)
#: words that may follow an operand without starting a clause
_INFIX = frozenset(
    {
        "AND", "OR", "XOR", "NOT", "IN", "IS", "AS", "STARTS", "ENDS", "WITH", "CONTAINS",
        "ASC", "DESC", "ASCENDING", "DESCENDING", "WHEN", "THEN", "ELSE", "END", "BY",
        "SHORTEST", "ALL", "TRAIL", "ACYCLIC", "WSHORTEST", "DISTINCT",
    }
)  # fmt: skip
#: keywords after which an operand follows (they do not end one)
_OPERATORS = _INFIX - {"ASC", "DESC", "ASCENDING", "DESCENDING", "END"}
#: words that end an operand although they are keywords
_LITERAL_WORDS = frozenset({"NULL", "TRUE", "FALSE", "ASC", "DESC", "ASCENDING", "DESCENDING", "END"})
#: statement keywords of either engine: refused anywhere unless the level allows them
#: (a second net under the clause allow-list, e.g. inside ``EXISTS { ... }``)
_KEYWORDS = _READ_CLAUSES | _WRITE_CLAUSES | frozenset(
    {
        "LOAD", "COPY", "INSTALL", "UNINSTALL", "UPDATE", "IMPORT", "EXPORT", "ATTACH", "USE",
        "BEGIN", "COMMIT", "ROLLBACK", "EXPLAIN", "PROFILE", "ANALYZE", "COMMENT", "SHOW",
        "TERMINATE", "GRANT", "DENY", "REVOKE", "START", "STOP", "ENABLE", "RENAME", "INSERT",
        "FINISH", "MACRO", "PERIODIC", "TRANSACTION", "TRANSACTIONS", "DATABASE",
    }
)  # fmt: skip
_PUNCT = set("()[]{},.:;$=<>+-*/%^|!")
_OPERATOR_PUNCT = set(".=<>+-*/%^|!")
_CHAIN_WORDS = frozenset(
    {"AND", "OR", "XOR", "NOT", "IN", "IS", "STARTS", "ENDS", "CONTAINS", "CASE", "WHEN"}
)
#: a backslash that an engine may read as the start of a unicode escape (any count of u)
_UNICODE_ESCAPE = re.compile(r"\\+[uU]")
#: every line terminator Java, Python or Unicode knows: each ends a ``//`` comment
_LINE_END = re.compile("[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
#: caps before any engine parses a query (the embedded store's parser recurses and
#: crashes on deep nesting; Neo4j's overflows its stack): see :func:`check_bounds`
MAX_LENGTH = 100_000
MAX_TOKENS = 20_000
MAX_DEPTH = 32
MAX_CHAIN = 256


@dataclass(frozen=True)
class Token:
    kind: str  # word, quoted (backtick name), string, number, param, punct
    text: str
    pos: int

    @property
    def upper(self) -> str:
        return self.text.upper()


def tokenize(text: str) -> list[Token]:
    """Cypher tokens, comments dropped; raises :class:`GateError` on text it cannot read surely.

    Two readings would differ from the engines', so they are refused outright rather than
    guessed: a backslash before ``u``/``U`` anywhere (Neo4j decodes ``\\uXXXX`` before it
    lexes, so ``\\u0027`` can end a string the gate thought open), and the text is first
    held to :data:`MAX_LENGTH`. A ``//`` comment ends at *any* line terminator (``\\r``,
    ``\\u2028``, ``\\u0085``, ...): ending it too early only makes the gate read more
    text as code, never less.
    """
    if len(text) > MAX_LENGTH:
        raise GateError(f"the query is {len(text):,} characters long; at most {MAX_LENGTH:,} are accepted")
    esc = _UNICODE_ESCAPE.search(text)
    if esc is not None:
        raise GateError(
            f"a unicode escape (backslash-u) at offset {esc.start()}: type the character itself "
            "(the server decodes escapes before it reads the query)"
        )
    out: list[Token] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace() and c.isascii():
            i += 1
        elif text.startswith("//", i):
            stop = _LINE_END.search(text, i)
            i = n if stop is None else stop.end()
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                raise GateError(f"unterminated /* comment at offset {i}")
            i = end + 2
        elif c in "'\"":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            if j >= n:
                raise GateError(f"unterminated string at offset {i}")
            out.append(Token("string", text[i : j + 1], i))
            i = j + 1
        elif c == "`":
            j = i + 1
            while True:
                end = text.find("`", j)
                if end < 0:
                    raise GateError(f"unterminated `name` at offset {i}")
                if text.startswith("``", end):
                    j = end + 2
                    continue
                break
            out.append(Token("quoted", text[i : end + 1], i))
            i = end + 1
        elif c.isascii() and (c.isalpha() or c == "_"):
            j = i + 1
            while j < n and text[j].isascii() and (text[j].isalnum() or text[j] == "_"):
                j += 1
            out.append(Token("word", text[i:j], i))
            i = j
        elif c.isascii() and c.isdigit():
            j = i + 1
            while j < n and text[j].isascii() and (text[j].isalnum() or text[j] == "_"):
                j += 1
            if j + 1 < n and text[j] == "." and text[j + 1].isdigit():  # 1.5, not 1..3
                j += 1
                while j < n and text[j].isascii() and (text[j].isalnum() or text[j] == "_"):
                    j += 1
            out.append(Token("number", text[i:j], i))
            i = j
        elif c == "$":
            j = i + 1
            while j < n and text[j].isascii() and (text[j].isalnum() or text[j] == "_"):
                j += 1
            if j == i + 1:
                raise GateError(f"a lone '$' at offset {i}")
            out.append(Token("param", text[i:j], i))
            i = j
        elif c in _PUNCT:
            out.append(Token("punct", c, i))
            i += 1
        else:
            raise GateError(f"unexpected character {c!r} at offset {i} (outside a string or `name`)")
    return out


def statements(tokens: list[Token]) -> list[list[Token]]:
    """Tokens split at top-level ``;`` (empty statements dropped)."""
    out: list[list[Token]] = [[]]
    for t in tokens:
        if t.kind == "punct" and t.text == ";":
            out.append([])
        else:
            out[-1].append(t)
    return [s for s in out if s]


def _ends_operand(t: Token, prev: Token | None) -> bool:
    if t.kind in ("string", "number", "param", "quoted"):
        return True
    if t.kind == "word":
        if prev is not None and prev.text in ".:|":  # a property, label or type name
            return True
        return t.upper not in (_READ_CLAUSES | _WRITE_CLAUSES | _OPERATORS) or t.upper in _LITERAL_WORDS
    if t.text in ")]}":
        return True
    # "*" is an operand after RETURN/WITH, "(" or ","; otherwise it multiplies
    return t.text == "*" and (
        prev is None or prev.text in "(,[" or prev.upper in ("RETURN", "WITH", "DISTINCT")
    )


def unquote(t: Token) -> str:
    """A name as the engine reads it: a backtick name without its backticks, ``````
    doubled inside it read as one."""
    return t.text[1:-1].replace("``", "`") if t.kind == "quoted" else t.text


def _chain(stmt: list[Token], i: int) -> tuple[list[Token], int]:
    """The dotted name starting at ``stmt[i]`` (parts may be backtick names) and the index
    of the token after it."""
    parts, j = [stmt[i]], i + 1
    while j + 1 < len(stmt) and stmt[j].text == "." and stmt[j + 1].kind in ("word", "quoted"):
        parts.append(stmt[j + 1])
        j += 2
    return parts, j


def _procedure(stmt: list[Token], at: int) -> tuple[str, int]:
    """The dotted name after CALL at ``at`` (backticks read as the engine reads them) and the
    index of the token after it."""
    if at + 1 >= len(stmt) or stmt[at + 1].kind not in ("word", "quoted"):
        return "", at + 1
    parts, j = _chain(stmt, at + 1)
    return ".".join(unquote(p) for p in parts), j


def check_bounds(tokens: list[Token]) -> None:
    """Refuse a query the engines' parsers may not survive: more than :data:`MAX_TOKENS`
    tokens, brackets nested deeper than :data:`MAX_DEPTH`, or more than :data:`MAX_CHAIN`
    operators in one run of an expression (``1+1+...``, ``NOT NOT ...``, ``a.b.c...``,
    counted per bracket level between commas). Both parsers recurse on these: the embedded
    store crashes the process (SIGSEGV) and Neo4j's server overflows its stack."""
    if len(tokens) > MAX_TOKENS:
        raise GateError(f"the query has {len(tokens):,} tokens; at most {MAX_TOKENS:,} are accepted")
    chains = [0]
    for t in tokens:
        if t.kind == "punct" and t.text in "([{":
            chains.append(0)
            if len(chains) - 1 > MAX_DEPTH:
                raise GateError(
                    f"the query nests brackets too deeply (more than {MAX_DEPTH}) at offset {t.pos}"
                )
        elif t.kind == "punct" and t.text in ")]}":
            if len(chains) > 1:
                chains.pop()
        elif t.kind == "punct" and t.text == ",":
            chains[-1] = 0
        elif (t.kind == "punct" and t.text in _OPERATOR_PUNCT) or (
            t.kind == "word" and t.upper in _CHAIN_WORDS
        ):
            chains[-1] += 1
            if chains[-1] > MAX_CHAIN:
                raise GateError(
                    f"the query chains more than {MAX_CHAIN} operators in one expression at offset {t.pos}"
                )


def check(text: str, engine: Engine | None, level: Level = Level.READ) -> None:
    """Raise :class:`GateError` unless every statement of ``text`` is allowed at ``level``
    on ``engine`` (the store backend, whose ``read_procedures`` a query may call; None: no
    procedure). A named query shipped with ctda that only reads passes at ``READ`` without
    being tokenized again: the tests pass each through :func:`check_text`
    (:mod:`ctda.queries.shipped`)."""
    if level is Level.READ and shipped_reader(text):
        return
    check_text(text, engine, level)


def check_text(text: str, engine: Engine | None, level: Level = Level.READ) -> None:
    """:func:`check`, every text tokenized."""
    if isinstance(engine, str):  # the read procedures are the backend's, not a dialect's
        raise TypeError(f"gate.check takes the store backend, not the name {engine!r}")
    if level is Level.UNSAFE:
        return
    tokens = tokenize(text)
    check_bounds(tokens)
    stmts = statements(tokens)
    if not stmts:
        raise GateError("the query is empty")
    if len(stmts) > 1:
        second = stmts[1][0]
        raise GateError(f"one statement per query: a second one starts at offset {second.pos}")
    clauses = _READ_CLAUSES | (_WRITE_CLAUSES if level is Level.WRITE else frozenset())
    procedures = engine.read_procedures if engine is not None else frozenset()
    for stmt in stmts:
        _check_statement(stmt, clauses, procedures, level)


def _refuse(t: Token, level: Level, what: str) -> GateError:
    hint = (
        "a read query may use MATCH, OPTIONAL MATCH, WITH, UNWIND, WHERE, RETURN, ORDER BY, "
        "SKIP, LIMIT, UNION and read procedures; --write allows data changes"
        if level is Level.READ
        else "file, extension, database and configuration access needs --allow-files"
    )
    return GateError(f"refused {what} at offset {t.pos} ({hint})")


def _check_statement(
    stmt: list[Token], clauses: frozenset[str], procedures: frozenset[str], level: Level
) -> None:
    denied = _KEYWORDS - clauses
    expect_clause = True  # the first word of a statement starts a clause
    prev: Token | None = None
    i = 0
    while i < len(stmt):
        t = stmt[i]
        nxt = stmt[i + 1] if i + 1 < len(stmt) else None
        word = t.upper if t.kind == "word" else ""
        if expect_clause:
            if word not in clauses:
                raise _refuse(t, level, f"clause {t.text[:40]!r}")
            need = {"DETACH": "DELETE", "OPTIONAL": "MATCH", "ORDER": "BY"}.get(word)
            if need and (nxt is None or nxt.upper != need):
                raise _refuse(t, level, f"{word} without {need}")
        # a bare word: not a property (n.x), label or type (:X, |Y) or map key ({x: 1})
        bare = (
            word
            and not (prev is not None and prev.text in ".:|")
            and not (nxt is not None and nxt.text == ":")
        )
        if bare and word in denied:
            raise _refuse(t, level, f"{t.text!r}")
        if bare and word == "CALL" and (sub := _subquery(stmt, i)) is not None:
            # CALL { ... } / CALL (vars) { ... }: its body is checked like a statement's
            prev, i, expect_clause = stmt[sub], sub + 1, True
            continue
        if bare and word == "CALL":
            name, j = _procedure(stmt, i)
            if name.lower() not in procedures or j >= len(stmt) or stmt[j].text != "(":
                raise _refuse(t, level, f"CALL {name or (nxt.text if nxt else '')!r}")
            prev, i, expect_clause = stmt[j - 1], j, False
            continue
        if t.kind in ("word", "quoted") and (prev is None or prev.text != "."):
            called = _extension_call(stmt, i)
            if called is not None and not _pure(called):
                raise _refuse(t, level, f"function {called.rstrip('`')[:60]!r}")
        if word == "UNION" and expect_clause:
            if nxt is not None and nxt.upper == "ALL":
                prev, i = nxt, i + 2
            else:
                prev, i = t, i + 1
            continue
        expect_clause = (
            not (expect_clause and word)  # a clause keyword is followed by its operand
            and _ends_operand(t, prev)
            and nxt is not None
            and nxt.kind in ("word", "quoted")
            and nxt.upper not in _INFIX
        )
        prev = t
        i += 1


def _subquery(stmt: list[Token], at: int) -> int | None:
    """Index of the ``{`` opening a ``CALL {`` or ``CALL (a, b) {`` subquery, else None."""
    j = at + 1
    if j < len(stmt) and stmt[j].text == "(":
        j += 1
        while j < len(stmt) and (stmt[j].kind == "word" or stmt[j].text in ",*"):
            j += 1
        if j >= len(stmt) or stmt[j].text != ")":
            return None
        j += 1
    return j if j < len(stmt) and stmt[j].text == "{" else None


def _extension_call(stmt: list[Token], i: int) -> str | None:
    """The name of the function ``stmt[i]`` calls when it is a dotted (``apoc.x.y(``) or
    backtick-quoted (```` `apoc`.x( ````) name: the engine's own built-ins need neither. The
    name is read as the engine reads it (backticks off), parts joined by dots."""
    parts, j = _chain(stmt, i)
    if j >= len(stmt) or stmt[j].text != "(":
        return None
    if len(parts) == 1 and parts[0].kind != "quoted":
        return None
    return ".".join(unquote(p) for p in parts) + ("`" if any(p.kind == "quoted" for p in parts) else "")


def _pure(name: str) -> bool:
    """Whether a dotted function may run in any query: a pure value conversion or a temporal
    constructor, spelled without backticks (a quoted name is never needed for them)."""
    if name.endswith("`"):
        return False
    low = name.lower()
    return low in PURE_FUNCTIONS or (low.count(".") == 1 and low.split(".")[0] in FUNCTION_NAMESPACES)
