// Per step of a stored distributed job: the job step (the slowest rank's), the slowest
// rank, the straggler (the latest to arrive at the step's collectives once stalls on a shared
// host are charged to their cause; -1: none) and that lateness, and the job path's length
// summed from its stretches (equal to the job step).
// @param job string  job name (ctda jobs)
MATCH (j:Job {name: $job, status: 'complete'})-[:HAS_STEP]->(s:JobStep)-[c:JOB_CP]->(:Event)
WITH s, coalesce(sum(c.ns), 0) AS path_ns
RETURN s.idx AS idx, s.step AS step, s.job_step_ns AS job_step_ns, path_ns, s.slowest_rank AS slowest_rank,
       s.fastest_rank_step_ns AS fastest_rank_step_ns, s.straggler AS straggler, s.late_ns AS late_ns,
       s.path_by_rank AS path_by_rank, s.straggler_top AS straggler_top
ORDER BY idx
