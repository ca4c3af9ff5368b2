// Kernels by total time over the whole trace: class (compute, communication, memory),
// count, duration statistics and the time the critical path spends in them.
// @param run string  run name (ctda runs)
// @param top int = 20  rows to return
MATCH (r:Run {name: $run, status: 'complete'})
MATCH (k:KernelStat)
WHERE k.run_id = r.id
RETURN k.name AS name, k.class AS class, k.count AS count, k.total_ns AS total_ns, k.mean_ns AS mean_ns,
       k.p50_ns AS p50_ns, k.p95_ns AS p95_ns, k.cp_ns AS cp_ns
ORDER BY total_ns DESC, name
LIMIT $top
