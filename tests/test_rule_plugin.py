"""An edge rule added by another package: a distribution on ``sys.path`` declaring a
module in the ``ctda.rules`` entry point group, as pip would install it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import ctda
from ctda.analysis.rules import registry
from tests.plugin_dist import installed

SMALL = Path(__file__).resolve().parent / "data" / "hta" / "simple_add_param_benchmark.json.gz"

PLUGIN = '''
import numpy as np

from ctda.analysis.edges import EdgeBatch, EdgeType
from ctda.analysis.rules.registry import rule


@rule("plugin_span", "cross_thread")
def plugin_span(ctx):
    """End of the event that ends first -> start of the event that starts last."""
    n = ctx.nodes
    first, last = int(np.argmin(n.end)), int(np.argmax(n.ts))
    return EdgeBatch.of([n.finish(np.array([first]))[0]], [n.start(np.array([last]))[0]], EdgeType.THREAD_SEQ)
'''


@pytest.fixture
def rule_plugin(tmp_path: Path) -> Iterator[None]:
    registry._LOADED = False
    try:
        with installed(tmp_path, "ctda_rule_plugin", PLUGIN, "ctda.rules", "span = ctda_rule_plugin\n"):
            yield
    finally:
        registry._RULES.pop("plugin_span", None)
        registry._LOADED = False


def test_a_plugin_rule_is_selectable_and_adds_its_edge(rule_plugin: None) -> None:
    names = registry.names("cross_thread")
    assert names[-1] == "plugin_span" and names[:-1] == tuple(
        s.name for s in registry.specs("cross_thread") if s.fn.__module__.startswith("ctda.")
    )
    assert registry.specs()[0].name == "duration"  # ctda's structural rules still run first
    with_rule = ctda.analyze(SMALL, cross_thread="plugin_span").graph
    without = ctda.analyze(SMALL, cross_thread="none").graph
    assert "plugin_span" in with_rule.rule_names and "plugin_span" not in without.rule_names
    mine = with_rule.rule == with_rule.rule_names.index("plugin_span")
    assert int(np.sum(mine)) == 1


CLASH = '''
from ctda.analysis.edges import EdgeBatch, EdgeType
from ctda.analysis.rules.registry import rule


@rule("hta_operator", "structural")
def taken(ctx):
    """A name HTA mode's rules already use."""
    return EdgeBatch.of([], [], EdgeType.THREAD_SEQ)
'''


def test_a_plugin_may_not_take_an_hta_rules_name_before_hta_is_loaded(tmp_path: Path) -> None:
    """HTA's package is imported only when its rules are asked for; a plugin declaring one
    of their names is refused when plugins load (one line naming it), as when HTA's rules
    were declared first, and HTA's rules stay HTA's."""
    from ctda.analysis.names import HTA_RULES

    registry.specs()  # every rule declared; then HTA's taken out, as in a process that never loaded them
    hta = {name: registry._RULES.pop(name) for name in HTA_RULES}
    registry._LOADED = False
    try:
        with (
            installed(tmp_path, "ctda_clash_plugin", CLASH, "ctda.rules", "clash = ctda_clash_plugin\n"),
            pytest.raises(registry.RuleError, match=r"plugin 'clash'.*'hta_operator' is declared twice"),
        ):
            registry.specs("structural")
        assert not set(HTA_RULES) & set(registry._RULES)  # the plugin took none of them
    finally:
        registry._RULES.update(hta)
        registry._LOADED = False
    assert registry.names("hta") == HTA_RULES
    assert registry.specs("hta")[0].fn.__module__.startswith("ctda.analysis.hta")
