package ctda.procedures;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;

import org.neo4j.graphdb.Direction;
import org.neo4j.graphdb.Label;
import org.neo4j.graphdb.Node;
import org.neo4j.graphdb.Relationship;
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

    @Context
    public Transaction tx;

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

    @Procedure(name = "ctda.replay", mode = Mode.READ)
    @Description("ctda.replay(runId, factors = {}, config = {}) :: per window the re-timed duration "
            + "and critical path of a stored ctda run. factors maps event idx (as text) to a duration "
            + "factor; events whose property config.property (default 'factor') is set use it too. "
            + "A factor applies to the event and everything nested inside it (the innermost wins).")
    public Stream<WindowPath> replay(
            @Name("runId") long runId,
            @Name(value = "factors", defaultValue = "{}") Map<String, Object> factors,
            @Name(value = "config", defaultValue = "{}") Map<String, Object> config) {
        Node run = tx.findNode(RUN, "id", runId);
        if (run == null || !"complete".equals(run.getProperty("status", null))) {
            throw new IllegalArgumentException("no complete ctda run with id " + runId);
        }
        String property = String.valueOf(config.getOrDefault("property", "factor"));
        RunGraph g = RunGraph.load(tx, runId, property);
        for (Map.Entry<String, Object> f : factors.entrySet()) {
            g.setFactor(parseIdx(f.getKey()), toDouble(f.getValue(), f.getKey()));
        }
        long t0 = ((Number) run.getProperty("t0_ns")).longValue();
        Timing timing = g.replay(t0);
        List<WindowPath> out = new ArrayList<>();
        try (ResourceIterator<Node> it = tx.findNodes(WINDOW, "run_id", runId)) {
            while (it.hasNext()) {
                Node w = it.next();
                if (!"baseline".equals(w.getProperty("scenario", null))) {
                    continue;
                }
                out.add(g.windowPath(w, timing));
            }
        }
        out.sort((a, b) -> Long.compare(a.window, b.window));
        return out.stream();
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

    /** Node times and each node's binding in-edge of one replay. */
    record Timing(long[] time, int[] bind) {
    }

    /** The run's points and edges as flat arrays (edge arrays indexed by DEP.edge). */
    static final class RunGraph {
        final int n; // analysed events; SOURCE has idx n, SINK idx n + 1
        final int[] parent;
        final double[] factor; // NaN where unset
        final int[] src;
        final int[] dst;
        final long[] weight;
        final int[] rank;
        final int[] owner;
        final String[] eventClass;
        final String[] eventName;
        final String[] waitClass;

        private RunGraph(int n, int m) {
            this.n = n;
            parent = new int[n + 2];
            factor = new double[n + 2];
            Arrays.fill(parent, -1);
            Arrays.fill(factor, Double.NaN);
            src = new int[m];
            dst = new int[m];
            weight = new long[m];
            rank = new int[m];
            owner = new int[m];
            eventClass = new String[n + 2];
            eventName = new String[n + 2];
            waitClass = new String[m];
        }

        static RunGraph load(Transaction tx, long runId, String property) {
            List<Node> events = new ArrayList<>();
            long edges = 0;
            try (ResourceIterator<Node> it = tx.findNodes(EVENT, "run_id", runId)) {
                while (it.hasNext()) {
                    Node e = it.next();
                    events.add(e);
                    edges += e.getDegree(DEP, Direction.OUTGOING);
                }
            }
            if (events.size() < 2 || edges > Integer.MAX_VALUE) {
                throw new IllegalArgumentException("run " + runId + " has no dependency graph to replay");
            }
            RunGraph g = new RunGraph(events.size() - 2, (int) edges);
            // one property read per entity; edge ends resolved through the nodes' element ids
            Map<String, Integer> idxOf = new HashMap<>(events.size() * 2);
            int[] idx = new int[events.size()];
            for (int k = 0; k < events.size(); k++) {
                Node e = events.get(k);
                Map<String, Object> p = e.getProperties("idx", "parent", "class", "display_name", property);
                int i = ((Number) p.get("idx")).intValue();
                if (i < 0 || i >= g.n + 2) {
                    throw new IllegalArgumentException("event idx " + i + " out of range: re-ingest the run");
                }
                idx[k] = i;
                idxOf.put(e.getElementId(), i);
                Object parent = p.get("parent");
                if (parent != null) {
                    g.parent[i] = ((Number) parent).intValue();
                }
                g.eventClass[i] = String.valueOf(p.getOrDefault("class", ""));
                g.eventName[i] = String.valueOf(p.getOrDefault("display_name", ""));
                Object f = p.get(property);
                if (f != null && i < g.n) {
                    g.setFactor(i, toDouble(f, "event " + i));
                }
            }
            boolean[] seen = new boolean[(int) edges];
            for (int k = 0; k < events.size(); k++) {
                int i = idx[k];
                for (Relationship r : events.get(k).getRelationships(Direction.OUTGOING, DEP)) {
                    Map<String, Object> p =
                            r.getProperties("edge", "src_end", "dst_end", "weight", "type", "binding", "owner");
                    int e = ((Number) p.get("edge")).intValue();
                    if (e < 0 || e >= seen.length || seen[e]) {
                        throw new IllegalArgumentException("DEP edge ids of run " + runId + " are not 0..m-1");
                    }
                    seen[e] = true;
                    Integer j = idxOf.get(r.getEndNode().getElementId());
                    if (j == null) {
                        throw new IllegalArgumentException("edge " + e + " leaves run " + runId);
                    }
                    g.src[e] = g.point(i, Boolean.TRUE.equals(p.get("src_end")));
                    g.dst[e] = g.point(j, Boolean.TRUE.equals(p.get("dst_end")));
                    g.weight[e] = ((Number) p.get("weight")).longValue();
                    String type = String.valueOf(p.get("type"));
                    Integer pr = PRIORITY.get(type);
                    if (pr == null) {
                        throw new IllegalArgumentException("unknown DEP type " + type);
                    }
                    g.waitClass[e] = WAIT_CLASS.getOrDefault(type, "cpu_gap");
                    g.rank[e] = pr + (Boolean.TRUE.equals(p.get("binding")) ? PREFERRED : 0);
                    Object o = p.get("owner");
                    g.owner[e] = o == null ? -1 : ((Number) o).intValue();
                }
            }
            return g;
        }

        void setFactor(int i, double f) {
            if (i < 0 || i >= n) {
                throw new IllegalArgumentException("no analysed event with idx " + i);
            }
            factor[i] = f;
        }

        /** Point id as in ctda's engine: 2i start, 2i + 1 end; SOURCE 2n, SINK 2n + 1. */
        int point(int event, boolean end) {
            return event >= n ? n + event : 2 * event + (end ? 1 : 0);
        }

        int points() {
            return 2 * n + 2;
        }

        /** Each event's factor: its own, else its nearest enclosing event's, else 1. */
        double[] effectiveFactors() {
            double[] eff = new double[n];
            boolean[] done = new boolean[n];
            int[] chain = new int[n + 1];
            for (int i = 0; i < n; i++) {
                int len = 0;
                int v = i;
                double value = 1.0;
                while (v >= 0 && v < n && !done[v]) {
                    if (!Double.isNaN(factor[v])) {
                        value = factor[v];
                        break;
                    }
                    chain[len++] = v;
                    v = parent[v];
                    if (len > n) {
                        throw new IllegalArgumentException("cycle in event nesting: re-ingest the run");
                    }
                }
                if (v >= 0 && v < n) {
                    value = done[v] ? eff[v] : factor[v];
                    if (!done[v]) {
                        eff[v] = value;
                        done[v] = true;
                    }
                }
                for (int k = 0; k < len; k++) {
                    eff[chain[k]] = value;
                    done[chain[k]] = true;
                }
            }
            return eff;
        }

        Timing replay(long t0) {
            double[] eff = effectiveFactors();
            int m = src.length;
            int p = points();
            long[] w = new long[m];
            // a replayed time is t0 (within 2^62, as the reader keeps it) plus the weights on one
            // path: while all scaled weights together stay under 2^62 no time can wrap (the
            // cast to long would saturate silently); the same bound as ctda's Python engine
            double total = 0;
            for (int e = 0; e < m; e++) {
                int o = owner[e];
                double scaled = o >= 0 ? Math.rint(weight[e] * eff[o]) : weight[e];
                total += Math.abs(scaled);
                w[e] = (long) scaled;
            }
            if (!(total < TIME_LIMIT_NS)) {
                throw new IllegalArgumentException(String.format(
                        "the scaled durations add up to %.3g s, past the time range ctda computes with "
                                + "(2^62 ns, about 146 years): use smaller factors", total / 1e9));
            }
            // in-edges per point in edge-id order (the engine's CSR order)
            int[] inPtr = new int[p + 1];
            for (int e = 0; e < m; e++) {
                inPtr[dst[e] + 1]++;
            }
            for (int v = 0; v < p; v++) {
                inPtr[v + 1] += inPtr[v];
            }
            int[] fill = Arrays.copyOf(inPtr, p);
            int[] inEdges = new int[m];
            int[] outPtr = new int[p + 1];
            for (int e = 0; e < m; e++) {
                inEdges[fill[dst[e]]++] = e;
                outPtr[src[e] + 1]++;
            }
            for (int v = 0; v < p; v++) {
                outPtr[v + 1] += outPtr[v];
            }
            int[] ofill = Arrays.copyOf(outPtr, p);
            int[] outEdges = new int[m];
            for (int e = 0; e < m; e++) {
                outEdges[ofill[src[e]]++] = e;
            }
            // Kahn: the result of the forward pass does not depend on which valid order is used
            int[] pending = new int[p];
            for (int v = 0; v < p; v++) {
                pending[v] = inPtr[v + 1] - inPtr[v];
            }
            int[] queue = new int[p];
            int head = 0;
            int tail = 0;
            for (int v = 0; v < p; v++) {
                if (pending[v] == 0) {
                    queue[tail++] = v;
                }
            }
            long[] time = new long[p];
            int[] bind = new int[p];
            int source = 2 * n;
            while (head < tail) {
                int v = queue[head++];
                bind[v] = -1;
                if (v == source) {
                    time[v] = t0;
                } else {
                    long best = Long.MIN_VALUE;
                    int bestE = -1;
                    for (int j = inPtr[v]; j < inPtr[v + 1]; j++) {
                        int e = inEdges[j];
                        long a = time[src[e]] + w[e];
                        if (a > best || (a == best && rank[e] > rank[bestE])) {
                            best = a;
                            bestE = e;
                        }
                    }
                    time[v] = best;
                    bind[v] = bestE;
                }
                for (int j = outPtr[v]; j < outPtr[v + 1]; j++) {
                    int d = dst[outEdges[j]];
                    if (--pending[d] == 0) {
                        queue[tail++] = d;
                    }
                }
            }
            if (tail != p) {
                throw new IllegalArgumentException("the stored dependency graph has a cycle");
            }
            return new Timing(time, bind);
        }

        WindowPath windowPath(Node w, Timing t) {
            Object ev = w.getProperty("event", null);
            if (ev == null) {
                throw new IllegalArgumentException("window without its event: re-ingest the run with this ctda");
            }
            int event = ((Number) ev).intValue();
            int startPoint = event >= 0 ? 2 * event : 2 * n;
            int endPoint = event >= 0 ? 2 * event + 1 : 2 * n + 1;
            long lo = t.time()[startPoint];
            long hi = t.time()[endPoint];
            List<Integer> back = new ArrayList<>();
            int v = endPoint;
            while (true) {
                int e = t.bind()[v];
                if (e < 0) {
                    break;
                }
                back.add(e);
                v = src[e];
                if (t.time()[v] <= lo) {
                    break;
                }
            }
            WindowPath out = new WindowPath();
            out.window = ((Number) w.getProperty("idx")).longValue();
            out.label = String.valueOf(w.getProperty("label", ""));
            out.step = ((Number) w.getProperty("step", -1L)).longValue();
            out.baseNs = ((Number) w.getProperty("duration_ns", 0L)).longValue();
            out.startNs = lo;
            out.endNs = hi;
            out.predictedNs = hi - lo;
            out.edges = new ArrayList<>();
            out.events = new ArrayList<>();
            out.waits = new ArrayList<>();
            out.charges = new ArrayList<>();
            out.classes = new ArrayList<>();
            out.names = new ArrayList<>();
            for (int k = back.size() - 1; k >= 0; k--) {
                int e = back.get(k);
                long clipped = Math.min(t.time()[dst[e]], hi) - Math.max(t.time()[src[e]], lo);
                if (clipped <= 0) {
                    continue;
                }
                boolean wait = owner[e] < 0;
                int target = wait ? eventOf(dst[e]) : owner[e];
                out.edges.add((long) e);
                out.events.add((long) target);
                out.waits.add(wait);
                out.charges.add(clipped);
                out.classes.add(wait ? waitClass[e] : eventClass[owner[e]]);
                out.names.add(eventName[target]);
            }
            return out;
        }

        /** Event idx of a point (SOURCE and SINK map to their pseudo events n and n + 1). */
        int eventOf(int point) {
            return point < 2 * n ? point / 2 : point - n;
        }
    }
}
