// An event's dependency edges: what it waits for (direction 'in') and what waits for
// it ('out'), with type, rule, weight, observed gap and whether the edge is binding.
// @param run string  run name (ctda runs)
// @param event int  event index (Event.idx)
// Ladybug variant: no CALL {} subqueries, and ORDER BY after UNION ALL sorts only the
// last part, so each part is sorted on its own ('in' rows come first either way). The
// event is found by run_id and idx: milliseconds in Ladybug, where matching a computed
// key scans every event (Neo4j is the other way round: its key has a unique index).
MATCH (r:Run {name: $run, status: 'complete'})
MATCH (e:Event)
WHERE e.run_id = r.id AND e.idx = $event
MATCH (o:Event)-[d:DEP]->(e)
RETURN 'in' AS direction, d.edge AS edge, d.type AS type, d.rule AS rule, d.weight AS weight_ns, d.gap AS gap_ns,
       d.binding AS binding, d.on_cp AS on_cp, o.idx AS other, o.name AS other_name, o.lane_label AS other_lane
ORDER BY edge
UNION ALL
MATCH (r:Run {name: $run, status: 'complete'})
MATCH (e:Event)
WHERE e.run_id = r.id AND e.idx = $event
MATCH (e)-[d:DEP]->(o:Event)
RETURN 'out' AS direction, d.edge AS edge, d.type AS type, d.rule AS rule, d.weight AS weight_ns, d.gap AS gap_ns,
       d.binding AS binding, d.on_cp AS on_cp, o.idx AS other, o.name AS other_name, o.lane_label AS other_lane
ORDER BY edge
