// Each rank's lateness in each step of a stored job (the straggler heatmap): its arrival at
// the step's collectives minus the median arrival, summed; positive: the others waited.
// @param job string  job name (ctda jobs)
MATCH (j:Job {name: $job, status: 'complete'})
MATCH (l:JobLateness)
WHERE l.job_id = j.id
RETURN l.idx AS idx, l.step AS step, l.rank AS rank, l.late_ns AS late_ns
ORDER BY idx
