// Device time per window and device: compute, communication (not under compute), memory
// (under neither) and idle, in ns and as shares of the window; window -1 is the whole
// trace. See docs/breakdowns.md.
// @param run string  run name (ctda runs)
MATCH (r:Run {name: $run, status: 'complete'})
MATCH (d:DeviceTime)
WHERE d.run_id = r.id
WITH d, CASE WHEN d.span_ns > 0 THEN 1.0 * d.span_ns ELSE 1.0 END AS span
RETURN d.window AS window, d.label AS label, d.device AS device, d.span_ns AS span_ns,
       d.compute_ns AS compute_ns, d.communication_ns AS communication_ns, d.memory_ns AS memory_ns,
       d.idle_ns AS idle_ns, d.idle_ns / span AS idle_share, d.compute_ns / span AS compute_share
ORDER BY CASE WHEN window < 0 THEN 1 ELSE 0 END, window, device
