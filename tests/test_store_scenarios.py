"""Saved what-if scenarios and blobs in a store, on both backends (the store side of
``ctda whatif``, the UI's Save and ``ctda compare RUN@SCENARIO``)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ctda.store import open_store
from ctda.store.base import StoreError
from ctda.store.config import Target
from tests.neo4j_fixture import neo4j_server  # noqa: F401
from tests.test_store_suite import SMALL, store_ingest, target

__all__ = ["target"]


def test_scenarios_and_blobs(target: Target) -> None:
    """The what-if side of the interface: the analysis snapshot and saved scenarios."""
    from ctda.analysis import snapshot

    done = store_ingest(target, SMALL, name="r")
    rid = done.run.id
    with open_store(target) as s:
        blob = s.get_blob(rid, "snapshot")
        assert blob is not None
        assert snapshot.load(blob).nodes.n == done.run.events
        assert s.get_blob(rid, "nothing") is None
        assert s.scenarios(rid) == []
        rec = {
            "name": "half",
            "overrides": [{"label": "x"}],
            "step_ns": [5, 6],
            "predicted_ns": 11,
            "path": [1, 2],
        }
        record = json.dumps(rec)
        s.save_scenario(rid, "half", record)
        s.save_scenario(rid, "half", record)  # replaces
        (sc,) = s.scenarios(rid)
        assert sc["name"] == "half" and sc["data"] == record and sc["cp_ns"] == 11 and "path" not in sc
        assert s.scenarios(rid, path=True)[0]["path"] == [1, 2]
        s.save_scenario(rid, "apart", json.dumps({**rec, "path": []}), path=np.array([7, 8, 9]))
        assert [(x["name"], x["path"]) for x in s.scenarios(rid, path=True)] == [
            ("apart", [7, 8, 9]),
            ("half", [1, 2]),
        ]
        assert s.delete_scenario(rid, "apart")
        # the overrides apart (the record lists their summaries), a long path with big
        # and backward steps: both come back whole, and only when asked for
        far = np.arange(300_000, dtype=np.int64)[::-1] * 7 + (1 << 41)
        whole = json.dumps([{"label": "x", "events": [3, 4], "factor": 0.5, "dur_ns": None}])
        s.save_scenario(rid, "big", json.dumps({"name": "big", "overrides": [{"label": "x"}]}), far, whole)
        (big,) = s.scenarios(rid, path=True, name="big")
        assert big["path"] == far.tolist() and big["overrides_json"] == whole
        listed = s.scenarios(rid, overrides=False)
        assert [x["name"] for x in listed] == ["big", "half"]
        assert all("overrides_json" not in x for x in listed)
        assert s.scenarios(rid, name="nothing") == []
        assert s.delete_scenario(rid, "big")
        s.save_scenario(rid, "bare", json.dumps({"name": "bare"}))  # a record without a path
        assert next(x for x in s.scenarios(rid, path=True) if x["name"] == "bare")["path"] == []
        assert s.delete_scenario(rid, "bare")
        with pytest.raises(StoreError):
            s.save_scenario(rid, "baseline", record)
        assert s.delete_scenario(rid, "half")
        assert not s.delete_scenario(rid, "half")
        assert s.delete_run("r")
        assert s.get_blob(rid, "snapshot") is None
