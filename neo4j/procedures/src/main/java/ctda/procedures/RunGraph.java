package ctda.procedures;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.neo4j.graphdb.Direction;
import org.neo4j.graphdb.Node;
import org.neo4j.graphdb.Relationship;
import org.neo4j.graphdb.ResourceIterator;
import org.neo4j.graphdb.Transaction;

/**
 * One stored run's dependency graph as flat primitive arrays, read once and then replayed
 * any number of times (edge arrays are indexed by DEP.edge).
 *
 * <p>Immutable after {@link #load}: what varies per call (the factors) is passed to {@link
 * #replay}, so one instance is shared by concurrent calls through {@link RunCache}. Besides
 * the edges it keeps what every replay needs and that depends on the graph alone: the
 * in-edges of each point in edge-id order (the engine's CSR order, which the tie-break
 * relies on), a topological order of the points, and the run's baseline windows.
 */
final class RunGraph {

    /** Class charged for a wait edge: {@link Replay#WAIT_CLASS}'s values, by code. */
    private static final String[] WAIT_NAMES =
            Replay.WAIT_CLASS.values().stream().distinct().sorted().toArray(String[]::new);

    /** A baseline window of the run: its stored fields and its bounding event. */
    record Window(long idx, String label, long step, long durationNs, int event) {
    }

    final int n; // analysed events; SOURCE has idx n, SINK idx n + 1
    final long t0;
    final int[] parent;
    final String[] eventClass;
    final String[] eventName;
    final int[] src;
    final int[] dst;
    final long[] weight;
    final int[] rank;
    final int[] owner;
    final byte[] waitCode;
    final int[] inPtr;
    final int[] inEdges;
    final int[] order;
    final List<Window> windows = new ArrayList<>();

    private RunGraph(int n, int m, long t0) {
        this.n = n;
        this.t0 = t0;
        parent = new int[n + 2];
        Arrays.fill(parent, -1);
        eventClass = new String[n + 2];
        eventName = new String[n + 2];
        src = new int[m];
        dst = new int[m];
        weight = new long[m];
        rank = new int[m];
        owner = new int[m];
        waitCode = new byte[m];
        inPtr = new int[points() + 1];
        inEdges = new int[m];
        order = new int[points()];
    }

    /** Heap bytes of the arrays (strings are shared: names repeat across a trace's steps). */
    long bytes() {
        long m = src.length;
        return m * (4 + 4 + 8 + 4 + 4 + 1 + 4) + (long) (n + 2) * (4 + 8 + 8) + (long) points() * (4 + 4);
    }

    /** Reads run {@code runId}'s events, DEP edges and baseline windows in {@code tx}. */
    static RunGraph load(Transaction tx, long runId, long t0) {
        List<Node> events = new ArrayList<>();
        long edges = 0;
        try (ResourceIterator<Node> it = tx.findNodes(Replay.EVENT, "run_id", runId)) {
            while (it.hasNext()) {
                Node e = it.next();
                events.add(e);
                edges += e.getDegree(Replay.DEP, Direction.OUTGOING);
            }
        }
        if (events.size() < 2 || edges > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("run " + runId + " has no dependency graph to replay");
        }
        RunGraph g = new RunGraph(events.size() - 2, (int) edges, t0);
        int[] idx = g.readEvents(events);
        g.readEdges(runId, events, idx);
        g.index();
        g.readWindows(tx, runId);
        return g;
    }

    /** Each event's nesting, class and name; returns the idx of each node in list order. */
    @SuppressWarnings("deprecation") // Node.getId: a dense number, far cheaper to map than element ids
    private int[] readEvents(List<Node> events) {
        Map<String, String> shared = new HashMap<>();
        int[] idx = new int[events.size()];
        for (int k = 0; k < events.size(); k++) {
            Node e = events.get(k);
            Map<String, Object> p = e.getProperties("idx", "parent", "class", "display_name");
            int i = ((Number) p.get("idx")).intValue();
            if (i < 0 || i >= n + 2) {
                throw new IllegalArgumentException("event idx " + i + " out of range: re-ingest the run");
            }
            idx[k] = i;
            Object up = p.get("parent");
            if (up != null) {
                parent[i] = ((Number) up).intValue();
            }
            String cls = String.valueOf(p.getOrDefault("class", ""));
            String name = String.valueOf(p.getOrDefault("display_name", ""));
            eventClass[i] = shared.computeIfAbsent(cls, s -> s);
            eventName[i] = shared.computeIfAbsent(name, s -> s);
        }
        return idx;
    }

    @SuppressWarnings("deprecation")
    private void readEdges(long runId, List<Node> events, int[] idx) {
        LongIntMap idxOf = new LongIntMap(events.size());
        for (int k = 0; k < events.size(); k++) {
            idxOf.put(events.get(k).getId(), idx[k]);
        }
        boolean[] seen = new boolean[src.length];
        for (int k = 0; k < events.size(); k++) {
            int i = idx[k];
            for (Relationship r : events.get(k).getRelationships(Direction.OUTGOING, Replay.DEP)) {
                Map<String, Object> p =
                        r.getProperties("edge", "src_end", "dst_end", "weight", "type", "binding", "owner");
                int e = ((Number) p.get("edge")).intValue();
                if (e < 0 || e >= seen.length || seen[e]) {
                    throw new IllegalArgumentException("DEP edge ids of run " + runId + " are not 0..m-1");
                }
                seen[e] = true;
                int j = idxOf.get(r.getEndNode().getId());
                if (j < 0) {
                    throw new IllegalArgumentException("edge " + e + " leaves run " + runId);
                }
                src[e] = point(i, Boolean.TRUE.equals(p.get("src_end")));
                dst[e] = point(j, Boolean.TRUE.equals(p.get("dst_end")));
                weight[e] = ((Number) p.get("weight")).longValue();
                String type = String.valueOf(p.get("type"));
                Integer pr = Replay.PRIORITY.get(type);
                if (pr == null) {
                    throw new IllegalArgumentException("unknown DEP type " + type);
                }
                String wait = Replay.WAIT_CLASS.getOrDefault(type, "cpu_gap");
                waitCode[e] = (byte) Arrays.binarySearch(WAIT_NAMES, wait);
                rank[e] = pr + (Boolean.TRUE.equals(p.get("binding")) ? Replay.PREFERRED : 0);
                Object o = p.get("owner");
                owner[e] = o == null ? -1 : ((Number) o).intValue();
            }
        }
    }

    /** In-edges per point in edge-id order, and a topological order of the points (Kahn). */
    private void index() {
        int m = src.length;
        int p = points();
        for (int e = 0; e < m; e++) {
            inPtr[dst[e] + 1]++;
        }
        for (int v = 0; v < p; v++) {
            inPtr[v + 1] += inPtr[v];
        }
        int[] fill = Arrays.copyOf(inPtr, p);
        int[] outPtr = new int[p + 1];
        for (int e = 0; e < m; e++) {
            inEdges[fill[dst[e]]++] = e;
            outPtr[src[e] + 1]++;
        }
        for (int v = 0; v < p; v++) {
            outPtr[v + 1] += outPtr[v];
        }
        int[] ofill = Arrays.copyOf(outPtr, p);
        int[] outDst = new int[m];
        for (int e = 0; e < m; e++) {
            outDst[ofill[src[e]]++] = dst[e];
        }
        int[] pending = new int[p];
        int tail = 0;
        for (int v = 0; v < p; v++) {
            pending[v] = inPtr[v + 1] - inPtr[v];
            if (pending[v] == 0) {
                order[tail++] = v;
            }
        }
        for (int head = 0; head < tail; head++) {
            int v = order[head];
            for (int j = outPtr[v]; j < outPtr[v + 1]; j++) {
                if (--pending[outDst[j]] == 0) {
                    order[tail++] = outDst[j];
                }
            }
        }
        if (tail != p) {
            throw new IllegalArgumentException("the stored dependency graph has a cycle");
        }
    }

    private void readWindows(Transaction tx, long runId) {
        try (ResourceIterator<Node> it = tx.findNodes(Replay.WINDOW, "run_id", runId)) {
            while (it.hasNext()) {
                Node w = it.next();
                if (!"baseline".equals(w.getProperty("scenario", null))) {
                    continue;
                }
                Object ev = w.getProperty("event", null);
                if (ev == null) {
                    throw new IllegalArgumentException(
                            "window without its event: re-ingest the run with this ctda");
                }
                windows.add(new Window(
                        ((Number) w.getProperty("idx")).longValue(),
                        String.valueOf(w.getProperty("label", "")),
                        ((Number) w.getProperty("step", -1L)).longValue(),
                        ((Number) w.getProperty("duration_ns", 0L)).longValue(),
                        ((Number) ev).intValue()));
            }
        }
        windows.sort((a, b) -> Long.compare(a.idx(), b.idx()));
    }

    /** Point id as in ctda's engine: 2i start, 2i + 1 end; SOURCE 2n, SINK 2n + 1. */
    int point(int event, boolean end) {
        return event >= n ? n + event : 2 * event + (end ? 1 : 0);
    }

    int points() {
        return 2 * n + 2;
    }

    /** Each event's factor: its own (NaN where unset), else its nearest enclosing event's, else 1. */
    double[] effectiveFactors(double[] factor) {
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

    /** Node times and each node's binding in-edge of one replay. */
    record Timing(long[] time, int[] bind) {
    }

    /** The forward pass with each event's own factor ({@code factor[i]}, NaN where unset). */
    Timing replay(double[] factor) {
        double[] eff = effectiveFactors(factor);
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
        if (!(total < Replay.TIME_LIMIT_NS)) {
            throw new IllegalArgumentException(String.format(
                    "the scaled durations add up to %.3g s, past the time range ctda computes with "
                            + "(2^62 ns, about 146 years): use smaller factors", total / 1e9));
        }
        // any topological order gives the same result: each point is the latest arrival
        long[] time = new long[p];
        int[] bind = new int[p];
        int source = 2 * n;
        for (int v : order) {
            if (v == source) {
                time[v] = t0;
                bind[v] = -1;
                continue;
            }
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
        return new Timing(time, bind);
    }

    /** A window's re-timed bounds and its critical path: edge ids in time order, charged ns. */
    record Path(long lo, long hi, int[] edges, long[] charges) {
    }

    /** Window {@code w}'s critical path: binding edges back from its end, clipped to the window. */
    Path windowChain(Window w, Timing t) {
        int startPoint = w.event() >= 0 ? 2 * w.event() : 2 * n;
        int endPoint = w.event() >= 0 ? 2 * w.event() + 1 : 2 * n + 1;
        long lo = t.time()[startPoint];
        long hi = t.time()[endPoint];
        int[] back = new int[16];
        int len = 0;
        int v = endPoint;
        while (true) {
            int e = t.bind()[v];
            if (e < 0) {
                break;
            }
            if (len == back.length) {
                back = Arrays.copyOf(back, 2 * len);
            }
            back[len++] = e;
            v = src[e];
            if (t.time()[v] <= lo) {
                break;
            }
        }
        int[] edges = new int[len];
        long[] charges = new long[len];
        int k = 0;
        for (int q = len - 1; q >= 0; q--) {
            int e = back[q];
            long clipped = Math.min(t.time()[dst[e]], hi) - Math.max(t.time()[src[e]], lo);
            if (clipped > 0) {
                edges[k] = e;
                charges[k++] = clipped;
            }
        }
        return new Path(lo, hi, Arrays.copyOf(edges, k), Arrays.copyOf(charges, k));
    }

    /** Window {@code w}'s re-timed duration and its critical path, as lists Cypher can read. */
    Replay.WindowPath windowPath(Window w, Timing t) {
        Path path = windowChain(w, t);
        Replay.WindowPath out = new Replay.WindowPath();
        out.window = w.idx();
        out.label = w.label();
        out.step = w.step();
        out.baseNs = w.durationNs();
        out.startNs = path.lo();
        out.endNs = path.hi();
        out.predictedNs = path.hi() - path.lo();
        int len = path.edges().length;
        out.edges = new ArrayList<>(len);
        out.events = new ArrayList<>(len);
        out.waits = new ArrayList<>(len);
        out.charges = new ArrayList<>(len);
        out.classes = new ArrayList<>(len);
        out.names = new ArrayList<>(len);
        for (int k = 0; k < len; k++) {
            int e = path.edges()[k];
            boolean wait = owner[e] < 0;
            int target = wait ? eventOf(dst[e]) : owner[e];
            out.edges.add((long) e);
            out.events.add((long) target);
            out.waits.add(wait);
            out.charges.add(path.charges()[k]);
            out.classes.add(wait ? WAIT_NAMES[waitCode[e]] : eventClass[owner[e]]);
            out.names.add(eventName[target]);
        }
        return out;
    }

    /**
     * Window {@code w}'s re-timed duration and its critical path as packed little-endian
     * arrays (edge ids as int32, charges as int64): a client holding the run's analysis
     * rebuilds names and classes from the edge ids, so only these cross the wire, in two
     * byte strings instead of six lists of boxed values.
     */
    Replay.WindowArrays windowArrays(Window w, Timing t) {
        Path path = windowChain(w, t);
        Replay.WindowArrays out = new Replay.WindowArrays();
        out.window = w.idx();
        out.label = w.label();
        out.step = w.step();
        out.baseNs = w.durationNs();
        out.startNs = path.lo();
        out.endNs = path.hi();
        out.predictedNs = path.hi() - path.lo();
        ByteBuffer edges = ByteBuffer.allocate(4 * path.edges().length).order(ByteOrder.LITTLE_ENDIAN);
        edges.asIntBuffer().put(path.edges());
        ByteBuffer charges = ByteBuffer.allocate(8 * path.charges().length).order(ByteOrder.LITTLE_ENDIAN);
        charges.asLongBuffer().put(path.charges());
        out.edges = edges.array();
        out.charges = charges.array();
        return out;
    }

    /** Event idx of a point (SOURCE and SINK map to their pseudo events n and n + 1). */
    int eventOf(int point) {
        return point < 2 * n ? point / 2 : point - n;
    }

    /** Open-addressing map from node id to event idx (boxed maps cost ~50 bytes an entry). */
    static final class LongIntMap {
        private final long[] keys;
        private final int[] values;
        private final int mask;

        LongIntMap(int expected) {
            int cap = Integer.highestOneBit(Math.max(4, expected) * 2 - 1) << 1;
            keys = new long[cap];
            values = new int[cap];
            Arrays.fill(keys, -1L); // node ids are never negative
            mask = cap - 1;
        }

        private int slot(long key) {
            int h = (int) (key * 0x9E3779B97F4A7C15L >>> 32) & mask;
            while (keys[h] != -1L && keys[h] != key) {
                h = (h + 1) & mask;
            }
            return h;
        }

        void put(long key, int value) {
            int h = slot(key);
            keys[h] = key;
            values[h] = value;
        }

        /** The value of {@code key}, or -1. */
        int get(long key) {
            int h = slot(key);
            return keys[h] == key ? values[h] : -1;
        }
    }
}
