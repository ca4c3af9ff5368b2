package ctda.procedures;

import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Supplier;

/**
 * The graphs of the runs replayed last, so that a user trying factor after factor pays for
 * reading a run from the store once, not per call.
 *
 * <p>An entry is valid while its run's stamp is unchanged: the Run node's element id and the
 * properties a write of the run sets (when it was ingested, the trace's hash, the options,
 * the event and edge counts, its start). ctda never edits a stored run's events or edges: a
 * re-ingest writes a new Run node and a delete removes it, so either changes the stamp (or
 * makes the run disappear) and the next call reads the run again. Bounded: at most {@link
 * #MAX_RUNS} runs and {@link #HEAP_SHARE} of the server's heap, least recently used first out.
 * Shared by all calls of the JVM: entries are immutable, the map is guarded by its monitor, and
 * one run is read by one call at a time (others wait for it rather than read it again).
 */
final class RunCache {

    static final int MAX_RUNS = 4;
    static final double HEAP_SHARE = 0.25;

    /** A run of one database, as the cache keys it. */
    record Key(String database, long runId) {
    }

    private record Entry(Map<String, Object> stamp, RunGraph graph) {
    }

    private static final LinkedHashMap<Key, Entry> RUNS = new LinkedHashMap<>(8, 0.75f, true);
    private static final Map<Key, Object> LOADING = new ConcurrentHashMap<>();
    private static long hits;
    private static long loads;

    private RunCache() {
    }

    /** The cached graph of {@code key} if its stamp still matches, else {@code load}'s (cached). */
    static RunGraph get(Key key, Map<String, Object> stamp, Supplier<RunGraph> load) {
        RunGraph g = lookup(key, stamp);
        if (g != null) {
            return g;
        }
        Object lock = LOADING.computeIfAbsent(key, k -> new Object());
        synchronized (lock) { // a second caller of the same run waits and then hits
            g = lookup(key, stamp);
            if (g != null) {
                return g;
            }
            g = load.get();
            put(key, new Entry(stamp, g));
            return g;
        }
    }

    /** Drops {@code key}'s graph (its run is gone or incomplete). */
    static synchronized void forget(Key key) {
        RUNS.remove(key);
    }

    private static synchronized RunGraph lookup(Key key, Map<String, Object> stamp) {
        Entry e = RUNS.get(key);
        if (e == null) {
            return null;
        }
        if (!Objects.equals(e.stamp(), stamp)) {
            RUNS.remove(key); // re-ingested or changed: never served again
            return null;
        }
        hits++;
        return e.graph();
    }

    private static synchronized void put(Key key, Entry entry) {
        loads++;
        RUNS.put(key, entry);
        long cap = (long) (Runtime.getRuntime().maxMemory() * HEAP_SHARE);
        long bytes = RUNS.values().stream().mapToLong(x -> x.graph().bytes()).sum();
        Iterator<Map.Entry<Key, Entry>> it = RUNS.entrySet().iterator();
        // least recently used first; the run just read stays (this call is using it anyway)
        while ((RUNS.size() > MAX_RUNS || bytes > cap) && it.hasNext()) {
            Map.Entry<Key, Entry> old = it.next();
            if (old.getKey().equals(key)) {
                continue;
            }
            bytes -= old.getValue().graph().bytes();
            it.remove();
        }
    }

    /** Runs held, calls served from the cache and reads from the store since the server started. */
    static synchronized long[] stats() {
        return new long[] {RUNS.size(), hits, loads};
    }
}
