// Hotspots by name: critical-path time of each event name (step numbers and object
// addresses folded), its share of the path, and its self time and count inside the
// selected windows. An op that ran long but overlapped other work has little CP time.
// Waits and gaps on the path are in the `waits` query.
// @param run string  run name (ctda runs)
// @param step int = -1  ProfilerStep number; -1 selects every window
// @param scenario string = baseline  scenario (baseline = the observed trace)
// @param top int = 1000000  rows to return
MATCH (r:Run {name: $run, status: 'complete'})-[:HAS_SCENARIO]->(s:Scenario {name: $scenario})-[:HAS_WINDOW]->(w:Window)
WHERE $step < 0 OR w.step = $step
WITH r, s, collect(w.idx) AS wins, sum(w.cp_ns) AS cp_total, sum(w.self_ns) AS self_total
MATCH (e:Event)
WHERE e.run_id = r.id
// (the segment is not re-anchored at s: Ladybug's OPTIONAL MATCH then yields one row per e;
// and the window filter sits in the sums, not in a WHERE on the OPTIONAL MATCH, which
// Ladybug evaluates about 4x slower)
OPTIONAL MATCH (x:Segment)-[c:CP]->(e)
WITH r, cp_total, self_total, e, coalesce(e.window IN wins, false) AS inside,
     sum(CASE WHEN x.scenario = $scenario AND x.window IN wins AND NOT c.wait THEN c.ns ELSE 0 END) AS cp,
     sum(CASE WHEN x.scenario = $scenario AND x.window IN wins AND NOT c.wait THEN 1 ELSE 0 END) AS charged
WHERE inside OR charged > 0
WITH r, cp_total, self_total, e.display_name AS name,
     sum(cp) AS cp_ns,
     sum(CASE WHEN charged > 0 THEN 1 ELSE 0 END) AS on_cp,
     sum(CASE WHEN inside THEN e.self_ns ELSE 0 END) AS total_ns,
     sum(CASE WHEN inside THEN 1 ELSE 0 END) AS count,
     min(CASE WHEN inside THEN e.idx END) AS first
OPTIONAL MATCH (f:Event)
WHERE f.key = r.id * 1099511627776 + first
RETURN name, coalesce(f.cat, '') AS category, coalesce(f.class, '') AS class,
       cp_ns, 1.0 * cp_ns / CASE WHEN cp_total > 0 THEN cp_total ELSE 1 END AS cp_share,
       total_ns, 1.0 * total_ns / CASE WHEN self_total > 0 THEN self_total ELSE 1 END AS total_share,
       count, on_cp
ORDER BY cp_ns DESC, total_ns DESC, name
LIMIT $top
