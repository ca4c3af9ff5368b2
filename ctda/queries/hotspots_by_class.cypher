// Critical-path time by bound-by class (cpu, gpu_compute, gpu_comm, launch_overhead,
// sync_wait, cross_thread, cpu_gap, ...) over the selected windows.
// @param run string  run name (ctda runs)
// @param step int = -1  ProfilerStep number; -1 selects every window
// @param scenario string = baseline  scenario (baseline = the observed trace)
MATCH (r:Run {name: $run, status: 'complete'})-[:HAS_SCENARIO]->(s:Scenario {name: $scenario})-[:HAS_WINDOW]->(w:Window)
WHERE $step < 0 OR w.step = $step
WITH s, collect(w.idx) AS wins, sum(w.cp_ns) AS cp_total
MATCH (s)-[:HAS_WINDOW]->(w:Window)-[:HAS_SEGMENT]->(:Segment)-[c:CP]->(:Event)
WHERE w.idx IN wins
WITH cp_total, c.class AS class, sum(c.ns) AS cp_ns
RETURN class, cp_ns, 1.0 * cp_ns / CASE WHEN cp_total > 0 THEN cp_total ELSE 1 END AS share
ORDER BY cp_ns DESC, class
