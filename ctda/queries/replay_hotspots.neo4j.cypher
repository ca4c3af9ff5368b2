// In-database what-if: hotspots of the re-timed critical paths (every window, or one
// step): time on the path per event name (folded), and per wait class. Factors as in
// `replay_steps` (event property and/or a stored scenario).
// @param run string  run name (ctda runs)
// @param step int = -1  ProfilerStep number; -1 selects every window
// @param scenario string = baseline  stored scenario whose overrides to apply
// @param property string = factor  Event property holding your factors
// @param top int = 20  rows to return
MATCH (r:Run {name: $run, status: 'complete'})
OPTIONAL MATCH (r)-[:HAS_SCENARIO]->(s:Scenario {name: $scenario})
WITH r, s WHERE $scenario IN ['', 'baseline'] OR s IS NOT NULL
WITH r, CASE WHEN s IS NULL OR $scenario = 'baseline' THEN [] ELSE apoc.convert.fromJsonList(s.overrides_json) END AS ovs
WITH r, apoc.map.fromPairs(reduce(acc = [], o IN [x IN ovs WHERE x.factor IS NOT NULL] |
       acc + [e IN o.events | [toString(e), o.factor]])) AS factors
CALL ctda.replay(r.id, factors, {property: $property})
YIELD step, events, waits, charges, classes
WITH r, step, events, waits, charges, classes
WHERE $step < 0 OR step = $step
UNWIND range(0, size(events) - 1) AS pos
WITH r, events[pos] AS idx, waits[pos] AS wait, charges[pos] AS ns, classes[pos] AS class
MATCH (e:Event {key: r.id * 1099511627776 + idx})
WITH CASE WHEN wait THEN '(' + class + ')' ELSE e.display_name END AS name, class, ns
WITH name, class, sum(ns) AS cp_ns, count(*) AS stretches
WITH collect({name: name, class: class, cp_ns: cp_ns, stretches: stretches}) AS rows, sum(cp_ns) AS total
UNWIND rows AS row
RETURN row.name AS name, row.class AS class, row.cp_ns AS cp_ns,
       1.0 * row.cp_ns / CASE WHEN total > 0 THEN total ELSE 1 END AS cp_share, row.stretches AS stretches
ORDER BY cp_ns DESC, name
LIMIT $top
