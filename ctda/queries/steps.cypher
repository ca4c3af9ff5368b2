// Per window (each ProfilerStep, or the whole trace): start, duration, critical path
// length and the class that bounds it.
// @param run string  run name (ctda runs)
// @param step int = -1  ProfilerStep number; -1 selects every window
// @param scenario string = baseline  scenario (baseline = the observed trace)
MATCH (r:Run {name: $run, status: 'complete'})-[:HAS_SCENARIO]->(s:Scenario {name: $scenario})-[:HAS_WINDOW]->(w:Window)
WHERE $step < 0 OR w.step = $step
RETURN w.idx AS idx, w.label AS window, w.step AS step, w.start_ms AS start_ms, w.duration_ns AS duration_ns,
       w.cp_ns AS cp_ns, w.bound_by AS bound_by, w.bound_by_share AS bound_by_share
ORDER BY idx
