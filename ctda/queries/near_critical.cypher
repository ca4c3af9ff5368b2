// Near-critical events: off every window's critical path but with the least slack, so
// the first to move the step if they grow (annotations and zero-length events skipped).
// @param run string  run name (ctda runs)
// @param step int = -1  ProfilerStep number; -1 selects every window
// @param scenario string = baseline  scenario (baseline = the observed trace)
// @param top int = 10  rows to return
MATCH (r:Run {name: $run, status: 'complete'})-[:HAS_SCENARIO]->(s:Scenario {name: $scenario})-[:HAS_WINDOW]->(w:Window)
WHERE $step < 0 OR w.step = $step
WITH r, collect(w.idx) AS wins
MATCH (e:Event)
WHERE e.run_id = r.id AND e.window IN wins AND NOT e.on_cp AND e.kind <> 'user_annotation' AND e.dur_ns > 0
RETURN e.display_name AS name, e.slack_ns AS slack_ns, e.dur_ns AS duration_ns, e.lane_label AS lane, e.idx AS event
ORDER BY slack_ns, duration_ns DESC, event
LIMIT $top
