// In-database what-if: the re-timed critical path of each window, in order: every stretch
// with the event it is charged to (for a wait or gap, the event that waited), its class and
// time. Factors as in `replay_steps` (event property and/or a stored scenario).
// @param run string  run name (ctda runs)
// @param step int = -1  ProfilerStep number; -1 selects every window
// @param scenario string = baseline  stored scenario whose overrides to apply
// @param property string = factor  Event property holding your factors
MATCH (r:Run {name: $run, status: 'complete'})
OPTIONAL MATCH (r)-[:HAS_SCENARIO]->(s:Scenario {name: $scenario})
WITH r, s WHERE $scenario IN ['', 'baseline'] OR s IS NOT NULL
WITH r, CASE WHEN s IS NULL OR $scenario = 'baseline' THEN [] ELSE apoc.convert.fromJsonList(s.overrides_json) END AS ovs
WITH r, apoc.map.fromPairs(reduce(acc = [], o IN [x IN ovs WHERE x.factor IS NOT NULL] |
       acc + [e IN o.events | [toString(e), o.factor]])) AS factors
CALL ctda.replay(r.id, factors, {property: $property})
YIELD window, label, step, edges, events, waits, charges, classes
WITH r, window, label, step, edges, events, waits, charges, classes
WHERE $step < 0 OR step = $step
UNWIND range(0, size(edges) - 1) AS pos
MATCH (e:Event {key: r.id * 1099511627776 + events[pos]})
RETURN window AS idx, label AS window, pos, edges[pos] AS edge, e.uid AS uid, e.name AS name,
       e.lane_label AS lane, classes[pos] AS class, waits[pos] AS wait, charges[pos] AS ns
ORDER BY idx, pos
