// In-database what-if, saved: re-time the run with the factors on its events (property
// `property`, e.g. set by `MATCH ... SET e.factor = 0.5`) and store the result as scenario
// `name`, which `ctda whatif`, `ctda compare RUN@NAME`, `ctda export --scenario` and the UI
// list like any other (they re-time it from the same overrides). Needs `ctda query --write`.
// @write
// @param run string  run name (ctda runs)
// @param name string  scenario name to create or replace (not baseline)
// @param property string = factor  Event property holding your factors
MATCH (r:Run {name: $run, status: 'complete'})
WITH r WHERE $name <> 'baseline' AND $name <> ''
CALL ctda.replay(r.id, {}, {property: $property})
YIELD baseNs, predictedNs, edges
WITH r, collect(predictedNs) AS steps, sum(baseNs) AS base, sum(predictedNs) AS predicted,
     reduce(acc = [], p IN collect(edges) | acc + p) AS path
CALL (r) {
  MATCH (e:Event {run_id: r.id}) WHERE e[$property] IS NOT NULL
  WITH e[$property] AS factor, collect(e.idx) AS events
  RETURN collect({label: 'Event.' + $property + ' = ' + toString(factor), events: events,
                  factor: toFloat(factor), dur_ns: null}) AS overrides
}
WITH r, steps, base, predicted, path, overrides,
     r.id + '/' + $name AS key
OPTIONAL MATCH (old:Scenario {key: key})
DETACH DELETE old
WITH DISTINCT r, steps, base, predicted, path, overrides, key
CREATE (r)-[:HAS_SCENARIO]->(s:Scenario)
SET s.key = key, s.run_id = r.id, s.name = $name, s.overrides_json = apoc.convert.toJson(overrides),
    s.step_ns = steps, s.cp_ns = predicted, s.path = path,
    s.created_at = toString(datetime.truncate('second', datetime())),
    s.data_json = apoc.convert.toJson({name: $name, overrides: overrides, base_ns: base,
                                       predicted_ns: predicted, step_ns: steps, path: path})
RETURN s.name AS scenario, base AS base_ns, predicted AS predicted_ns, size(overrides) AS overrides
