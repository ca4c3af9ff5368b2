// Launches per window (window -1: the whole trace): launch-call and launch-delay
// statistics, outliers, short kernels, and the launch delay on the critical path; with
// each stream's launch queue and the communication hidden under compute.
// @param run string  run name (ctda runs)
MATCH (r:Run {name: $run, status: 'complete'})
MATCH (l:LaunchStat)
WHERE l.run_id = r.id
OPTIONAL MATCH (q:QueueStat)
WHERE q.run_id = r.id AND q.window = l.window
WITH l, max(q.max_length) AS longest_queue, sum(q.full_ns) AS queue_full_ns
OPTIONAL MATCH (o:CommOverlap)
WHERE o.run_id = l.run_id AND o.window = l.window
RETURN l.window AS window, l.label AS label, l.launches AS launches, l.call_p95_ns AS call_p95_ns,
       l.delay_p50_ns AS delay_p50_ns, l.delay_p95_ns AS delay_p95_ns, l.delay_outliers AS delay_outliers,
       l.cp_delay_ns AS cp_delay_ns, longest_queue, queue_full_ns,
       sum(o.communication_ns) AS communication_ns, sum(o.exposed_ns) AS exposed_communication_ns
ORDER BY CASE WHEN window < 0 THEN 1 ELSE 0 END, window
