// PhaseTimer.java — wall-clock seconds per phase of a training step (rollout, reward, advantage,
// update), accumulated over however many times a phase runs in the step and drained as
// time/<phase>_s scalars: try (var t = timer.phase("rollout")) { ... }.
package dev.drmas.metrics;

import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.Map;
import java.util.Set;
import java.util.function.LongSupplier;

/**
 * Phases may nest (an "update" phase around per-model "update/policy" phases): each counts its own
 * wall time, so nested phases are not meant to add up to the outer one's. A phase cannot be open
 * twice at once, which would count its time twice. Not thread-safe: one timer per thread.
 */
public final class PhaseTimer {
    private final LongSupplier nanoClock;
    private final Map<String, Long> nanos = new LinkedHashMap<>();
    private final Set<String> open = new HashSet<>();
    private final Set<String> order = new LinkedHashSet<>();

    public PhaseTimer() {
        this(System::nanoTime);
    }

    /** @param nanoClock monotonic nanoseconds (tests pass their own) */
    public PhaseTimer(LongSupplier nanoClock) {
        this.nanoClock = nanoClock;
    }

    /** An open phase; closing it adds its duration to the phase's total. */
    public final class Phase implements AutoCloseable {
        private final String name;
        private final long start;
        private boolean closed;

        private Phase(String name, long start) {
            this.name = name;
            this.start = start;
        }

        @Override
        public void close() {
            if (closed) return;
            closed = true;
            nanos.merge(name, nanoClock.getAsLong() - start, Long::sum);
            open.remove(name);
        }
    }

    public Phase phase(String name) {
        if (name == null || name.isBlank()) throw new IllegalArgumentException("phase name must not be blank");
        if (!open.add(name)) throw new IllegalStateException("phase '" + name + "' is already open; close it first");
        order.add(name); // report in the order of first opening, not of closing (an inner phase closes first)
        return new Phase(name, nanoClock.getAsLong());
    }

    /** Seconds accumulated by {@code name} since the last drain (0 when it has not run). */
    public double seconds(String name) {
        return nanos.getOrDefault(name, 0L) / 1e9;
    }

    /**
     * The step's {@code time/<phase>_s} scalars in the order the phases first ran, then reset for
     * the next step. Phases still open are left out and keep running into the next step.
     */
    public Map<String, Double> drain() {
        var out = new LinkedHashMap<String, Double>();
        for (String name : order) {
            Long ns = nanos.get(name);
            if (ns != null) out.put("time/" + name + "_s", ns / 1e9);
        }
        nanos.clear();
        order.retainAll(open);
        return out;
    }
}
