// What-if selection: data loading takes no time ("if the DataLoader were free").
// Every event under a DataLoader __next__ (and the call itself) gets factor 0.
// @param run string  run name (ctda runs)
MATCH (r:Run {name: $run, status: 'complete'})
MATCH (e:Event)
WHERE e.run_id = r.id AND e.class = 'data_loading'
RETURN e.uid AS uid, 0.0 AS factor
