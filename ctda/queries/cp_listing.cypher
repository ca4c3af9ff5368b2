// The critical path of each selected window, in order: every stretch with its time,
// class and rule, and the event it is charged to (or, for a wait, the event
// that waited). `edge` feeds edge_provenance, `event` feeds event_neighbourhood.
// @param run string  run name (ctda runs)
// @param step int = -1  ProfilerStep number; -1 selects every window
// @param scenario string = baseline  scenario (baseline = the observed trace)
// @param top int = 1000000  rows to return
MATCH (r:Run {name: $run, status: 'complete'})-[:HAS_SCENARIO]->(s:Scenario {name: $scenario})-[:HAS_WINDOW]->(w:Window)
WHERE $step < 0 OR w.step = $step
MATCH (w)-[:HAS_SEGMENT]->(:Segment)-[c:CP]->(e:Event)
RETURN w.idx AS idx, w.label AS window, c.pos AS pos, 1.0 * (c.t0 - r.t0_ns) / 1000000.0 AS start_ms,
       c.ns AS ns, c.class AS class, c.rule AS rule, c.wait AS wait,
       e.idx AS event, e.name AS name, e.lane_label AS lane, c.edge AS edge
ORDER BY idx, pos
LIMIT $top
