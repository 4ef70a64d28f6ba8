// Sums.java — named sums that data-parallel ranks add up with one all-reduce: how batch metrics
// travel between ranks. The keys are fixed when the table is made, so that every rank sends the
// same vector in the same order.
package dev.drmas.train;

import dev.drmas.dist.Collective;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

final class Sums {
    private final Map<String, Integer> index = new LinkedHashMap<>();
    private final double[] values;

    Sums(List<String> keys) {
        for (String k : keys) {
            if (index.putIfAbsent(k, index.size()) != null) throw new IllegalArgumentException("key " + k + " is listed twice");
        }
        values = new double[index.size()];
    }

    private int at(String key) {
        Integer i = index.get(key);
        if (i == null) throw new IllegalArgumentException("no sum named " + key + "; sums: " + index.keySet());
        return i;
    }

    void add(String key, double v) {
        values[at(key)] += v;
    }

    double get(String key) {
        return values[at(key)];
    }

    /** Every rank's sums added up, in place (no-op on one rank). */
    Sums allReduce(Collective dist, String what) {
        dist.sum(values, what);
        return this;
    }
}
