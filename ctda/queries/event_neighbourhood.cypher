// An event's neighbourhood on the critical path: the k stretches before and after each
// place a window's path passes through the event (charged to it, or waiting in it).
// @param run string  run name (ctda runs)
// @param event int  event index (Event.idx, the `event` column of cp_listing)
// @param k int = 5  stretches on each side
// @param scenario string = baseline  scenario (baseline = the observed trace)
MATCH (r:Run {name: $run, status: 'complete'})-[:HAS_SCENARIO]->(s:Scenario {name: $scenario})-[:HAS_WINDOW]->(w:Window)
MATCH (w)-[:HAS_SEGMENT]->(:Segment)-[c:CP]->(e:Event)
WHERE e.key = r.id * 1099511627776 + $event
WITH w, c.pos AS at
MATCH (w)-[:HAS_SEGMENT]->(:Segment)-[n:CP]->(x:Event)
WHERE n.pos >= at - $k AND n.pos <= at + $k
RETURN w.idx AS idx, w.label AS window, at, n.pos AS pos, n.pos - at AS offset, n.ns AS ns, n.class AS class,
       n.rule AS rule, n.wait AS wait, x.idx AS event, x.name AS name, x.lane_label AS lane,
       n.edge AS edge
ORDER BY idx, at, pos
