// Why is this edge here: the rule that made a dependency edge, what that rule reads,
// the edge's type, weight and observed gap, and the trace fields of both endpoints.
// @param run string  run name (ctda runs)
// @param edge int  edge id (DEP.edge, the `edge` column of cp_listing)
MATCH (r:Run {name: $run, status: 'complete'})
MATCH (a:Event)-[d:DEP]->(b:Event)
WHERE d.edge = $edge AND a.run_id = r.id
OPTIONAL MATCH (ru:Rule)
WHERE ru.name = d.rule
RETURN d.edge AS edge, d.type AS type, d.rule AS rule, ru.doc AS rule_doc,
       d.weight AS weight_ns, d.gap AS gap_ns, d.binding AS binding, d.on_cp AS on_cp, d.owner AS owner,
       CASE WHEN d.src_end THEN 'end' ELSE 'start' END AS from_point,
       a.idx AS from_event, a.uid AS from_uid, a.name AS from_name, a.cat AS from_cat, a.pid AS from_pid,
       a.tid AS from_tid, a.ts_ns AS from_ts_ns, a.dur_ns AS from_dur_ns, a.correlation AS from_correlation,
       a.external_id AS from_external_id,
       CASE WHEN d.dst_end THEN 'end' ELSE 'start' END AS to_point,
       b.idx AS to_event, b.uid AS to_uid, b.name AS to_name, b.cat AS to_cat, b.pid AS to_pid,
       b.tid AS to_tid, b.ts_ns AS to_ts_ns, b.dur_ns AS to_dur_ns, b.correlation AS to_correlation,
       b.external_id AS to_external_id
