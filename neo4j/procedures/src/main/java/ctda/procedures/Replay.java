package ctda.procedures;

import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;

import org.neo4j.graphdb.GraphDatabaseService;
import org.neo4j.graphdb.Label;
import org.neo4j.graphdb.Node;
import org.neo4j.graphdb.RelationshipType;
import org.neo4j.graphdb.ResourceIterator;
import org.neo4j.graphdb.Transaction;
import org.neo4j.procedure.Context;
import org.neo4j.procedure.Description;
import org.neo4j.procedure.Mode;
import org.neo4j.procedure.Name;
import org.neo4j.procedure.Procedure;

/**
 * Re-times a stored ctda run inside the database.
 *
 * <p>The stored model is a max-plus system over time points: every analysed event has a
 * start and an end point, and every DEP edge says "its destination point happens no earlier
 * than its source point plus the edge's weight". Replaying the calibrated weights is a
 * weighted longest path from the run's SOURCE over that DAG; a what-if scales the weight of
 * the edges an event owns (its own time) by the event's factor, inherited by everything
 * nested inside it. The path of each window is the chain of binding edges back from the
 * window's end point to its start time, clipped to the window. Ties between arrivals are
 * broken exactly as ctda's Python engine breaks them (calibrated binding edges first, then
 * the edge type's priority, then the lowest edge id), so both give the same path, edge for
 * edge. See docs/in-database.md in the repository.
 */
public class Replay {

    /** Tie-break order of edge types; must match ctda.analysis.calibrate.PRIORITY. */
    static final Map<String, Integer> PRIORITY = Map.ofEntries(
            Map.entry("terminal", 0),
            Map.entry("release", 1),
            Map.entry("cross_rank", 2),
            Map.entry("cross_thread", 3),
            Map.entry("thread_seq", 4),
            Map.entry("stream_wait", 5),
            Map.entry("sync", 6),
            Map.entry("launch", 7),
            Map.entry("stream_seq", 8),
            Map.entry("segment", 9),
            Map.entry("duration", 10));

    /** Class charged for a wait or gap edge of each type; must match ctda.analysis.edges.SPECS. */
    static final Map<String, String> WAIT_CLASS = Map.of(
            "thread_seq", "cpu_gap",
            "stream_seq", "gpu_gap",
            "launch", "launch_overhead",
            "sync", "sync_wait",
            "stream_wait", "sync_wait",
            "cross_thread", "cross_thread",
            "cross_rank", "communication",
            "release", "cpu_gap",
            "terminal", "cpu_gap");

    static final int PREFERRED = 1 << 20;
    static final Label EVENT = Label.label("Event");
    static final Label RUN = Label.label("Run");
    static final Label WINDOW = Label.label("Window");
    static final RelationshipType DEP = RelationshipType.withName("DEP");

    /** Run properties that change whenever the run is written again (the cache's stamp). */
    static final String[] STAMP = {
        "ingested_at", "sha256", "options_key", "ctda_version", "schema_version", "events", "edges", "t0_ns"};

    @Context
    public Transaction tx;

    @Context
    public GraphDatabaseService db;

    /** One analysis window of the re-timed run with its critical path. */
    public static class WindowPath {
        public long window;
        public String label;
        public long step;
        public long baseNs;
        public long predictedNs;
        public long startNs;
        public long endNs;
        /** DEP.edge ids of the path in time order. */
        public List<Long> edges;
        /** Per path edge: the event whose own time it is, or the waiting event for a wait. */
        public List<Long> events;
        /** Per path edge: true when it is a wait or gap rather than an event's own time. */
        public List<Boolean> waits;
        /** Per path edge: time charged inside the window (ns). */
        public List<Long> charges;
        /** Per path edge: the bound-by class it is charged to. */
        public List<String> classes;
        /** Per path edge: the charged (or waiting) event's display name. */
        public List<String> names;
    }

    /** One window of the re-timed run with its critical path packed as bytes (see {@link #replayArrays}). */
    public static class WindowArrays {
        public long window;
        public String label;
        public long step;
        public long baseNs;
        public long predictedNs;
        public long startNs;
        public long endNs;
        /** DEP.edge ids of the path in time order, int32 little-endian. */
        public byte[] edges;
        /** Per path edge: time charged inside the window (ns), int64 little-endian. */
        public byte[] charges;
    }

    @Procedure(name = "ctda.replay", mode = Mode.READ)
    @Description("ctda.replay(runId, factors = {}, config = {}) :: per window the re-timed duration "
            + "and critical path of a stored ctda run. factors maps event idx (as text) to a duration "
            + "factor; events whose property config.property (default 'factor') is set use it too. "
            + "A factor applies to the event and everything nested inside it (the innermost wins).")
    public Stream<WindowPath> replay(
            @Name("runId") long runId,
            @Name(value = "factors", defaultValue = "{}") Map<String, Object> factors,
            @Name(value = "config", defaultValue = "{}") Map<String, Object> config) {
        RunGraph g = graph(runId);
        RunGraph.Timing timing = g.replay(factorsOf(g, runId, factors, config));
        return g.windows.stream().map(w -> g.windowPath(w, timing));
    }

    @Procedure(name = "ctda.replayArrays", mode = Mode.READ)
    @Description("ctda.replayArrays(runId, factors = {}, config = {}) :: ctda.replay's windows with each "
            + "path as two byte arrays: edges (DEP.edge ids, int32) and charges (ns, int64), little-endian. "
            + "For clients that hold the run's analysis and rebuild names and classes from the edge ids.")
    public Stream<WindowArrays> replayArrays(
            @Name("runId") long runId,
            @Name(value = "factors", defaultValue = "{}") Map<String, Object> factors,
            @Name(value = "config", defaultValue = "{}") Map<String, Object> config) {
        RunGraph g = graph(runId);
        RunGraph.Timing timing = g.replay(factorsOf(g, runId, factors, config));
        return g.windows.stream().map(w -> g.windowArrays(w, timing));
    }

    /** Run {@code runId}'s graph, from the cache while the run is unchanged. */
    private RunGraph graph(long runId) {
        RunCache.Key key = new RunCache.Key(db.databaseName(), runId);
        Node run = tx.findNode(RUN, "id", runId);
        if (run == null || !"complete".equals(run.getProperty("status", null))) {
            RunCache.forget(key);
            throw new IllegalArgumentException("no complete ctda run with id " + runId);
        }
        Map<String, Object> stamp = new HashMap<>(run.getProperties(STAMP));
        stamp.put("element_id", run.getElementId());
        long t0 = ((Number) run.getProperty("t0_ns")).longValue();
        return RunCache.get(key, stamp, () -> RunGraph.load(tx, runId, t0));
    }

    /** Each event's own factor (NaN where unset): the event property, then the map's entries. */
    private double[] factorsOf(RunGraph g, long runId, Map<String, Object> factors, Map<String, Object> config) {
        String property = String.valueOf(config.getOrDefault("property", "factor"));
        double[] factor = new double[g.n];
        Arrays.fill(factor, Double.NaN);
        propertyFactors(runId, property, factor);
        for (Map.Entry<String, Object> f : factors.entrySet()) {
            int i = parseIdx(f.getKey());
            if (i < 0 || i >= g.n) {
                throw new IllegalArgumentException("no analysed event with idx " + i);
            }
            factor[i] = toDouble(f.getValue(), f.getKey());
        }
        return factor;
    }

    /** What the replay cache holds and how often it answered, since the server started. */
    public static class CacheStats {
        public long runs;
        public long hits;
        public long loads;
    }

    @Procedure(name = "ctda.replayCache", mode = Mode.READ)
    @Description("ctda.replayCache() :: runs held by ctda.replay's cache, calls it answered from the "
            + "cache (hits) and runs it read from the store (loads) since the server started.")
    public Stream<CacheStats> replayCache() {
        long[] s = RunCache.stats();
        CacheStats out = new CacheStats();
        out.runs = s[0];
        out.hits = s[1];
        out.loads = s[2];
        return Stream.of(out);
    }

    /**
     * Factors set as event properties: read on every call, as users set them between calls
     * (and a property is not part of the cached graph). One property read per event; none
     * when no node of the database has ever had the property.
     */
    private void propertyFactors(long runId, String property, double[] factor) {
        boolean known = false;
        for (String k : tx.getAllPropertyKeys()) {
            if (k.equals(property)) {
                known = true;
                break;
            }
        }
        if (!known) {
            return;
        }
        try (ResourceIterator<Node> it = tx.findNodes(EVENT, "run_id", runId)) {
            while (it.hasNext()) {
                Node e = it.next();
                Object f = e.getProperty(property, null);
                if (f == null) {
                    continue;
                }
                int i = ((Number) e.getProperty("idx")).intValue();
                if (i >= 0 && i < factor.length) {
                    factor[i] = toDouble(f, "event " + i);
                }
            }
        }
    }

    static int parseIdx(String key) {
        try {
            return Integer.parseInt(key.trim());
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("factor keys are event idx values, got '" + key + "'");
        }
    }

    /** The largest duration factor (as ctda's Python engine): a million times slower. */
    static final double MAX_FACTOR = 1e6;
    /** Replayed times stay within +-2^62 ns, as the reader keeps a trace's times. */
    static final double TIME_LIMIT_NS = 0x1p62;

    static double toDouble(Object value, String what) {
        if (value instanceof Number n) {
            double d = n.doubleValue();
            if (d >= 0 && d <= MAX_FACTOR) { // NaN fails both
                return d;
            }
        }
        throw new IllegalArgumentException(
                "factor of " + what + " must be a finite number from 0 to 1e6, got " + value);
    }
}
