// In-database what-if: re-time a stored run inside Neo4j (ctda's `ctda.replay`
// procedure, a weighted longest path over the run's dependency graph) and return, per
// window, the observed and the predicted duration. Durations change where events carry a
// factor: the property named by `property` (set by your own `MATCH ... SET e.factor = 0.5`)
// and the overrides of a stored scenario (`scenario`; empty or baseline: none). A factor
// scales the event's own time and everything nested inside it.
// @param run string  run name (ctda runs)
// @param scenario string = baseline  stored scenario whose overrides to apply
// @param property string = factor  Event property holding your factors
MATCH (r:Run {name: $run, status: 'complete'})
OPTIONAL MATCH (r)-[:HAS_SCENARIO]->(s:Scenario {name: $scenario})
WITH r, s WHERE $scenario IN ['', 'baseline'] OR s IS NOT NULL
WITH r, CASE WHEN s IS NULL OR $scenario = 'baseline' THEN [] ELSE apoc.convert.fromJsonList(s.overrides_json) END AS ovs
WITH r, apoc.map.fromPairs(reduce(acc = [], o IN [x IN ovs WHERE x.factor IS NOT NULL] |
       acc + [e IN o.events | [toString(e), o.factor]])) AS factors
CALL ctda.replay(r.id, factors, {property: $property})
YIELD window, label, step, baseNs, predictedNs
RETURN window AS idx, label AS window, step, baseNs AS base_ns, predictedNs AS predicted_ns,
       predictedNs - baseNs AS delta_ns
ORDER BY idx
