// Runs in the store: name, trace file, size, step count, critical path length.
MATCH (r:Run)
WHERE r.status = 'complete'
RETURN r.name AS name, r.file AS file, r.events AS events, r.edges AS edges, r.steps AS steps,
       r.cp_ns AS cp_ns, r.ingested_at AS ingested_at, r.ctda_version AS ctda_version, r.sha256 AS sha256
ORDER BY name
