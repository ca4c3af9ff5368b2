// Bound-by breakdown per window: how each window's critical path splits over the
// bound-by classes, largest first.
// @param run string  run name (ctda runs)
// @param step int = -1  ProfilerStep number; -1 selects every window
// @param scenario string = baseline  scenario (baseline = the observed trace)
MATCH (r:Run {name: $run, status: 'complete'})-[:HAS_SCENARIO]->(s:Scenario {name: $scenario})-[:HAS_WINDOW]->(w:Window)
WHERE $step < 0 OR w.step = $step
MATCH (w)-[:HAS_SEGMENT]->(:Segment)-[c:CP]->(:Event)
WITH w, c.class AS class, sum(c.ns) AS cp_ns
RETURN w.idx AS idx, w.label AS window, class, cp_ns,
       1.0 * cp_ns / CASE WHEN w.cp_ns > 0 THEN w.cp_ns ELSE 1 END AS share
ORDER BY idx, cp_ns DESC, class
