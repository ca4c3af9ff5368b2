// What-if selection: every NCCL/RCCL communication kernel twice as fast.
// Returns (uid, factor) rows for `ctda whatif RUN --cypher whatif_halve_nccl`.
// @param run string  run name (ctda runs)
MATCH (r:Run {name: $run, status: 'complete'})
MATCH (e:Event)
WHERE e.run_id = r.id AND e.class = 'gpu_comm'
RETURN e.uid AS uid, 0.5 AS factor
