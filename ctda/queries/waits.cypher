// Waits and gaps on the critical path, by class: CPU idle, GPU stream idle, launch
// latency, sync latency, cross-thread hand-off. They are charged to no event.
// @param run string  run name (ctda runs)
// @param step int = -1  ProfilerStep number; -1 selects every window
// @param scenario string = baseline  scenario (baseline = the observed trace)
MATCH (r:Run {name: $run, status: 'complete'})-[:HAS_SCENARIO]->(s:Scenario {name: $scenario})-[:HAS_WINDOW]->(w:Window)
WHERE $step < 0 OR w.step = $step
WITH s, collect(w.idx) AS wins, sum(w.cp_ns) AS cp_total
MATCH (s)-[:HAS_WINDOW]->(w:Window)-[:HAS_SEGMENT]->(:Segment)-[c:CP]->(:Event)
WHERE w.idx IN wins AND c.wait
WITH cp_total, c.class AS class, sum(c.ns) AS cp_ns, count(*) AS stretches
RETURN class, cp_ns, 1.0 * cp_ns / CASE WHEN cp_total > 0 THEN cp_total ELSE 1 END AS cp_share, stretches
ORDER BY cp_ns DESC, class
