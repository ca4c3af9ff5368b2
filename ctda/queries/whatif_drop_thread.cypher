// What-if selection: drop one CPU thread's work (e.g. a background data-prep thread).
// Its events take no time; whatever waited for them (the GIL, a queue) waits less.
// @param run string  run name (ctda runs)
// @param tid string  thread id as in the trace (see hotspots_by_lane or ctda inspect)
MATCH (r:Run {name: $run, status: 'complete'})
MATCH (e:Event)
WHERE e.run_id = r.id AND e.tid = $tid AND NOT e.kind IN ['kernel', 'memcpy', 'memset', 'source', 'sink']
RETURN e.uid AS uid, 0.0 AS factor
