// Per step of a stored distributed job: the job step (bounded by its collectives: from the
// end of the previous step's last collective to the end of this one's, all ranks), the
// slowest rank by its own ProfilerStep, the straggler (the latest to arrive at the step's
// collectives once stalls on a shared host are charged to their cause, named only when its
// lateness exceeds the job's noise; -1: none) and that lateness, and the job path's length
// summed from its stretches (equal to the job step).
// @param job string  job name (ctda jobs)
MATCH (j:Job {name: $job, status: 'complete'})-[:HAS_STEP]->(s:JobStep)-[c:JOB_CP]->(:Event)
WITH s, coalesce(sum(c.ns), 0) AS path_ns
RETURN s.idx AS idx, s.step AS step, s.job_step_ns AS job_step_ns, path_ns, s.slowest_rank AS slowest_rank,
       s.fastest_rank_step_ns AS fastest_rank_step_ns, s.straggler AS straggler, s.late_ns AS late_ns,
       s.path_by_rank AS path_by_rank, s.straggler_top AS straggler_top
ORDER BY idx
