// The allocator per window and device (-1: host memory): allocations and frees, allocated
// memory at the start, peak and end, and the peak the caching allocator reserved. Empty
// for traces recorded without profile_memory=True.
// @param run string  run name (ctda runs)
MATCH (r:Run {name: $run, status: 'complete'})
MATCH (m:MemoryStat)
WHERE m.run_id = r.id
RETURN m.window AS window, m.label AS label, m.device AS device, m.allocations AS allocations,
       m.allocated_bytes AS allocated_bytes, m.frees AS frees, m.start_bytes AS start_bytes,
       m.peak_bytes AS peak_bytes, m.end_bytes AS end_bytes, m.peak_reserved_bytes AS peak_reserved_bytes
ORDER BY CASE WHEN window < 0 THEN 1 ELSE 0 END, window, device
