"""The named queries shipped with ctda that only read are neither tokenized nor planned again
on every run (``ctda.queries.shipped``): here each one passes the tokenizer's gate and its
plan the plan gate of each store, so a query file edited into something either gate refuses
fails this test instead."""

from __future__ import annotations

from typing import Any

import pytest

from ctda.queries import gate, loader
from ctda.queries.gate import Level
from ctda.queries.shipped import shipped_reader
from ctda.store import open_store
from ctda.store.base import Store
from ctda.store.config import Target
from tests.neo4j_fixture import neo4j_server  # noqa: F401
from tests.test_store_suite import SMALL, store_ingest, target  # noqa: F401

#: a value of each declared parameter type: plans do not depend on it
VALUES: dict[str, Any] = {"string": "x", "int": 1, "float": 1.0, "bool": True}


@pytest.fixture
def stored(target: Target) -> Target:  # noqa: F811
    """A fresh store of each kind (``target``) holding run ``r``."""
    store_ingest(target, SMALL, name="r")
    return target


def test_every_shipped_reader_passes_the_plan_gate(stored: Target) -> None:
    checked = []
    with open_store(stored, read_only=True) as s:
        for q in loader.load_all().values():
            if q.writes or not q.has(s.dialect):
                continue
            text = q.text(s.dialect)
            assert shipped_reader(text), q.name
            gate.check_text(text, s, Level.READ)  # the tokenizer's gate, every text tokenized
            s._check_plan(text, {p.name: VALUES[p.type] for p in q.params}, Level.READ)
            checked.append(q.name)
    assert len(checked) >= 20 and "hotspots_by_name" in checked


def test_only_shipped_readers_skip_the_plan(stored: Target, monkeypatch: pytest.MonkeyPatch) -> None:
    planned: list[str] = []
    with open_store(stored, read_only=True) as s:
        check = type(s)._check_plan

        def spy(self: Store, text: str, *args: Any) -> None:
            planned.append(text)
            check(self, text, *args)

        monkeypatch.setattr(type(s), "_check_plan", spy)
        named = loader.get("runs").text(s.dialect)
        assert [r[0] for r in s.query(named).rows] == ["r"]
        assert planned == []
        # the same text changed by one space, or any other text, is planned as before
        s.query(named + " ")
        s.query("MATCH (r:Run) RETURN r.name AS name")
        assert planned == [named + " ", "MATCH (r:Run) RETURN r.name AS name"]
    # a shipped query that writes is never a reader
    writers = [q for q in loader.load_all().values() if q.writes]
    assert writers and not any(shipped_reader(t) for q in writers for t in q.texts.values())
