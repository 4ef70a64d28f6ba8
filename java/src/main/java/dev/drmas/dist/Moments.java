// Moments.java — (count, mean, M2) of a set of numbers, merged exactly across ranks with Chan et
// al.'s parallel update (ARCHITECTURE §5), so a batch-level mean and std over rows spread across
// ranks equal the single-process ones up to rounding, without E[x²] − E[x]² cancellation.
package dev.drmas.dist;

/** @param m2 the sum of squared deviations from the mean */
public record Moments(double count, double mean, double m2) {
    public static final Moments EMPTY = new Moments(0, 0, 0);

    /** Adds one value (Welford). */
    public Moments plus(double x) {
        double n = count + 1, d = x - mean, mu = mean + d / n;
        return new Moments(n, mu, m2 + d * (x - mu));
    }

    /** The moments of the union of both sets (Chan et al.). */
    public Moments merge(Moments o) {
        if (o.count == 0) return this;
        if (count == 0) return o;
        double n = count + o.count, d = o.mean - mean;
        return new Moments(n, mean + d * (o.count / n), m2 + o.m2 + d * d * (count * o.count / n));
    }

    /** The population variance (divides by the count); 0 for fewer than two values. */
    public double variance() {
        return count > 0 ? Math.max(0, m2 / count) : 0;
    }

    /** Every rank's moments of each key, merged in rank order (so every rank gets the same bits). */
    public static Moments[] allMerge(Collective dist, Moments[] mine, String what) {
        if (dist.worldSize() == 1) return mine.clone();
        double[] flat = new double[3 * mine.length];
        for (int i = 0; i < mine.length; i++) {
            flat[3 * i] = mine[i].count;
            flat[3 * i + 1] = mine[i].mean;
            flat[3 * i + 2] = mine[i].m2;
        }
        double[][] all = dist.gather(flat, what);
        Moments[] out = new Moments[mine.length];
        for (int i = 0; i < mine.length; i++) {
            Moments m = EMPTY;
            for (double[] r : all) m = m.merge(new Moments(r[3 * i], r[3 * i + 1], r[3 * i + 2]));
            out[i] = m;
        }
        return out;
    }
}
