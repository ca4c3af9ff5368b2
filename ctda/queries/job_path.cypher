// The job path of a stored job's step (or of every step) stretch by stretch across the
// ranks, walked from the job step to the ranks' stored events: rank, its run, the event
// charged (for a wait, `wait` is true and the event is where the path resumes), class, time.
// @param job string  job name (ctda jobs)
// @param step string = all  a step label (ProfilerStep#N), or all
MATCH (j:Job {name: $job, status: 'complete'})-[:HAS_STEP]->(s:JobStep)
WHERE $step = 'all' OR s.step = $step
MATCH (s)-[c:JOB_CP]->(e:Event)
MATCH (j)-[h:HAS_RANK]->(r:Run)
WHERE r.id = e.run_id
RETURN s.idx AS idx, s.step AS step, c.pos AS pos, h.rank AS rank, r.name AS run, e.idx AS event, c.wait AS wait,
       e.name AS name, e.lane_label AS lane, c.class AS class, c.t0 AS t0, c.t1 AS t1, c.ns AS ns
ORDER BY idx, pos
