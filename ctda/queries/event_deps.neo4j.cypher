// An event's dependency edges: what it waits for (direction 'in') and what waits for
// it ('out'), with type, rule, weight, observed gap and whether the edge is binding.
// @param run string  run name (ctda runs)
// @param event int  event index (Event.idx)
// Neo4j variant: the two directions are one UNION inside CALL {}, sorted as a whole.
MATCH (r:Run {name: $run, status: 'complete'})
MATCH (e:Event {key: r.id * 1099511627776 + $event})
CALL (e) {
  MATCH (o:Event)-[d:DEP]->(e)
  RETURN 'in' AS direction, d AS d, o AS o
  UNION ALL
  MATCH (e)-[d:DEP]->(o:Event)
  RETURN 'out' AS direction, d AS d, o AS o
}
RETURN direction, d.edge AS edge, d.type AS type, d.rule AS rule, d.weight AS weight_ns, d.gap AS gap_ns,
       d.binding AS binding, d.on_cp AS on_cp, o.idx AS other, o.name AS other_name, o.lane_label AS other_lane
ORDER BY direction, edge
