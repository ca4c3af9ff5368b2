"""The hostile queries of ``test_hostile_queries.py`` (on real stores) and
``test_hostile_query_gate.py`` (the gates on their own): attacks by name, the plain
writes among them, and the bombs every bound must stop."""

from __future__ import annotations

from pathlib import Path

#: every line terminator one engine or another ends a ``//`` comment at
SEPARATORS = {"cr": "\r", "lf": "\n", "crlf": "\r\n", "ls": "\u2028", "ps": "\u2029", "nel": "\u0085",
              "vt": "\x0b", "ff": "\x0c"}  # fmt: skip


def attacks(url: str, file: Path) -> dict[str, str]:
    """Each hostile query by a short name; ``url`` is the local probe server, ``file`` a
    sentinel file outside the store."""
    furl = f"file://{file}"
    out = {
        # \uXXXX: Neo4j decodes escapes before it lexes, so \u0027 closes the string
        "uescape-string": f"WITH '\\u0027 AS a LOAD CSV FROM \"{furl}\" AS l RETURN l //' AS s RETURN s",
        "uescape-http": f"WITH '\\u0027 AS a LOAD CSV FROM \"{url}\" AS l RETURN l //' AS s RETURN s",
        "uescape-name": "RETURN apoc.\\u0063ypher.runFirstColumnSingle('RETURN 1', {}) AS x",
        "uescape-many-u": f"WITH '\\uuu0027 AS a LOAD CSV FROM \"{url}\" AS l RETURN l //' AS s RETURN s",
        "Uescape-8": f"WITH '\\U00000027 AS a LOAD CSV FROM \"{url}\" AS l RETURN l //' AS s RETURN s",
        "uescape-backtick": "RETURN \\u0060apoc\\u0060.cypher.runFirstColumnSingle('RETURN 1', {}) AS x",
        "block-comment": f"WITH 1 AS x /* note */ LOAD CSV FROM '{url}' AS l RETURN l",
        "unterminated-comment": "RETURN 1 AS x /* never closed",
        # backtick names: the namespace the old gate never saw
        "backtick-cypher": (
            f"RETURN `apoc`.cypher.runFirstColumnSingle('LOAD CSV FROM \"{url}\" AS l RETURN l', {{}}) AS x"
        ),
        "backtick-all-parts": "RETURN `apoc`.`cypher`.`runFirstColumnSingle`('RETURN 1', {}) AS x",
        "backtick-dotted-name": "RETURN `apoc.cypher.runFirstColumnSingle`('RETURN 1', {}) AS x",
        "backtick-escaped": "RETURN `ap``oc`.cypher.runFirstColumnSingle('RETURN 1', {}) AS x",
        "backtick-log": "CALL `apoc`.log.stream('debug.log') YIELD line RETURN line",
        "backtick-gds": "CALL `gds`.graph.project('g', '*', '*')",
        # functions where the old gate did not look: map values, list comprehensions, nesting
        "fn-in-map": "RETURN {a: apoc.cypher.runFirstColumnSingle('RETURN 1', {})} AS m",
        "fn-in-comprehension": "RETURN [x IN [1] | apoc.cypher.runFirstColumnSingle('RETURN 1', {})] AS l",
        "fn-nested": "RETURN apoc.convert.toJson(apoc.cypher.runFirstColumnSingle('RETURN 1', {})) AS j",
        "fn-case": "RETURN CASE WHEN true THEN apoc.text.join(['a'], ',') END AS c",
        # procedures, subqueries
        "apoc-cypher-run": (
            f"CALL apoc.cypher.run('LOAD CSV FROM \"{url}\" AS l RETURN l', {{}}) YIELD value RETURN value"
        ),
        "apoc-periodic-repeat": "CALL apoc.periodic.repeat('x', 'MATCH (n) RETURN n', 1000)",
        "apoc-periodic-iterate": "CALL apoc.periodic.iterate('MATCH (n) RETURN n', 'SET n.x = 1', {})",
        "apoc-load-json": f"CALL apoc.load.json('{url}') YIELD value RETURN value",
        "apoc-load-csv": f"CALL apoc.load.csv('{furl}') YIELD list RETURN list",
        "apoc-load-json-file": f"CALL apoc.load.json('{furl}') YIELD value RETURN value",
        "gds-write": "CALL gds.pageRank.write('g', {writeProperty: 'pr'})",
        "dbms-listconfig": "CALL dbms.listConfig() YIELD name, value RETURN name, value",
        "subquery-load": f"MATCH (n) CALL (n) {{ LOAD CSV FROM '{url}' AS l RETURN l }} RETURN l",
        "subquery-call": "CALL { CALL dbms.listConfig() YIELD name RETURN name } RETURN name",
        "in-transactions": "CALL { CREATE (:Run {id: 99}) } IN TRANSACTIONS",
        "exists-subquery": f"MATCH (n) WHERE EXISTS {{ LOAD CSV FROM '{url}' AS l RETURN l }} RETURN n",
        "show-settings": "SHOW SETTINGS",
        "show-procedures": "SHOW PROCEDURES",
        "use-system": "USE system SHOW USERS",
        "explain-prefix": "EXPLAIN MATCH (n) RETURN n",
        "load-csv-file": f"LOAD CSV FROM '{furl}' AS l RETURN l",
        "load-csv-http": f"LOAD CSV FROM '{url}' AS l RETURN l",
        "two-statements": f"RETURN 1 AS x; LOAD CSV FROM '{url}' AS l RETURN l",
        "write-without-flag": "CREATE (:Run {id: 99})",
        # the embedded store's own escapes
        "ladybug-load-from": f"LOAD FROM '{file}' RETURN *",
        "ladybug-copy-to": f"COPY (MATCH (r:Run) RETURN r.name) TO '{file}.out.csv'",
        "ladybug-extension": f"LOAD EXTENSION '{file}'",
        "ladybug-attach": f"ATTACH '{file}' AS other (dbtype lbug)",
        "ladybug-option": "CALL threads=1",
    }
    for key, sep in SEPARATORS.items():
        out[f"comment-{key}-load"] = f"WITH 1 AS x // note{sep}LOAD CSV FROM '{url}' AS l RETURN l"
        out[f"comment-{key}-config"] = (
            f"WITH 1 AS x // note{sep}CALL dbms.listConfig() YIELD name RETURN name"
        )
        out[f"comment-{key}-copy"] = f"RETURN 1 AS x // note{sep}COPY (RETURN 1) TO '{file}.out.csv'"
    return out


#: attacks that are plain data changes: refused for a read, allowed (to the gate) by --write
WRITES = {"write-without-flag"}
#: bombs: each must end in one line (gate, row cap, memory cap or timeout), never hang or crash
BOMBS = {
    "deep-brackets": "RETURN " + "[" * 1000 + "1" + "]" * 1000 + " AS x",
    "deep-parens": "RETURN " + "(" * 10000 + "1" + ")" * 10000 + " AS x",
    "long-sum": "RETURN 1" + "+1" * 10000 + " AS x",
    "not-chain": "RETURN " + "NOT " * 10000 + "true AS x",
    "too-long": "RETURN '" + "x" * 200_000 + "' AS x",
    # just past each cap (the ones above trip the token cap first)
    "parens-33": "RETURN " + "(" * 33 + "1" + ")" * 33 + " AS x",
    "maps-33": "RETURN " + "{a: " * 33 + "1" + "}" * 33 + " AS x",
    "sum-257": "RETURN 1" + "+1" * 257 + " AS x",
    "props-257": "MATCH (n) RETURN n" + ".a" * 257 + " AS x",
}


#: what a bound's refusal says
BOUNDED = r"too deeply|operators|characters long|tokens"
