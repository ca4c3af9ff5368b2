// Device idle time per window, stream and kind (host_wait, kernel_wait, other), with the
// critical path's share of it: idle on the path costs step time, idle off it does not.
// @param run string  run name (ctda runs)
// @param window int = -2  Window.idx; -1 the whole trace; -2 every window
MATCH (r:Run {name: $run, status: 'complete'})
MATCH (i:StreamIdle)
WHERE i.run_id = r.id AND ($window = -2 OR i.window = $window)
RETURN i.window AS window, i.label AS label, i.device AS device, i.stream AS stream, i.idle AS idle,
       i.idle_ns AS idle_ns, i.cp_ns AS cp_ns,
       1.0 * i.cp_ns / CASE WHEN i.idle_ns > 0 THEN i.idle_ns ELSE 1 END AS on_path_share
ORDER BY CASE WHEN window < 0 THEN 1 ELSE 0 END, window, device, stream, idle
