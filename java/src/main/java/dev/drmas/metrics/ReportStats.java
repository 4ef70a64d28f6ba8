// ReportStats.java — the few statistics a run report states: a mean with its 95% interval over
// seeds (Student's t, so that three seeds are not read as more certain than they are), and how spiky
// a gradient-norm curve is (max / median over the steps, and the steps above 3× the median of the
// steps before them), the paper's Fig. 4 in numbers. A non-finite norm is a blow-up, not a gap: it
// is a spike and makes the curve's max/median infinite; a zero norm (a step without a non-zero
// advantage) is no gradient, not a calm one, so the medians are over the positive norms.
package dev.drmas.metrics;

import java.util.Arrays;

final class ReportStats {
    private ReportStats() {
    }

    /** Two-sided 97.5% quantiles of Student's t for 1..30 degrees of freedom. */
    private static final double[] T975 = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
        2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042};

    /** The standard normal's 97.5% quantile. */
    private static final double Z975 = 1.959963984540054;

    /** A mean and the half-width of its 95% interval (NaN for one value: no interval) over n values. */
    record Interval(double mean, double halfWidth, int n) {
        boolean overlaps(Interval o) {
            if (Double.isNaN(halfWidth) || Double.isNaN(o.halfWidth)) return true;  // unknown spread: cannot tell them apart
            return mean - halfWidth <= o.mean + o.halfWidth && o.mean - o.halfWidth <= mean + halfWidth;
        }

        String show() {
            if (n == 0) return "–";
            return Double.isNaN(halfWidth) ? String.format(java.util.Locale.ROOT, "%.3f", mean)
                    : String.format(java.util.Locale.ROOT, "%.3f ± %.3f", mean, halfWidth);
        }

        /** As {@link #show()}, with "(n=…)" where fewer values than the {@code seeds} of the row stand behind it. */
        String show(int seeds) {
            return n == seeds || n == 0 ? show() : show() + " (n=" + n + ")";
        }
    }

    /**
     * Student's t 97.5% quantile for {@code df} degrees of freedom: the table to 30, above it the
     * Cornish-Fisher expansion in 1/df (Abramowitz and Stegun 26.7.5), whose error there is far
     * below the table's rounding, where 1.96 would understate the interval by 4% at 31.
     */
    static double t975(int df) {
        if (df < 1) throw new IllegalArgumentException("degrees of freedom: " + df);
        if (df <= T975.length) return T975[df - 1];
        double z = Z975, z2 = z * z, v = df;
        double g1 = (z2 + 1) * z / 4;
        double g2 = ((5 * z2 + 16) * z2 + 3) * z / 96;
        double g3 = (((3 * z2 + 19) * z2 + 17) * z2 - 15) * z / 384;
        double g4 = ((((79 * z2 + 776) * z2 + 1482) * z2 - 1920) * z2 - 945) * z / 92160;
        return z + g1 / v + g2 / (v * v) + g3 / (v * v * v) + g4 / (v * v * v * v);
    }

    static Interval interval(double[] xs) {
        int n = xs.length;
        if (n == 0) return new Interval(Double.NaN, Double.NaN, 0);
        double mean = Arrays.stream(xs).average().orElseThrow();
        if (n == 1) return new Interval(mean, Double.NaN, 1);
        double ss = 0;
        for (double x : xs) ss += (x - mean) * (x - mean);
        double sd = Math.sqrt(ss / (n - 1));
        return new Interval(mean, t975(n - 1) * sd / Math.sqrt(n), n);
    }

    static double median(double[] xs) {
        double[] s = xs.clone();
        Arrays.sort(s);
        int n = s.length;
        return n == 0 ? Double.NaN : n % 2 == 1 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
    }

    /** The positive finite values of {@code xs[0..end)}. */
    private static double[] positive(double[] xs, int end) {
        return Arrays.stream(xs, 0, end).filter(x -> Double.isFinite(x) && x > 0).toArray();
    }

    /**
     * max / median of a curve, the median over its positive values: +∞ when a value is not finite
     * (a blow-up), NaN when no value is positive (an agent that never had a gradient).
     */
    static double maxOverMedian(double[] xs) {
        if (Arrays.stream(xs).anyMatch(x -> !Double.isFinite(x))) return Double.POSITIVE_INFINITY;
        double[] pos = positive(xs, xs.length);
        return pos.length == 0 ? Double.NaN : Arrays.stream(pos).max().orElseThrow() / median(pos);
    }

    /** How many of a curve's values are not finite. */
    static int nonFinite(double[] xs) {
        return (int) Arrays.stream(xs).filter(x -> !Double.isFinite(x)).count();
    }

    /**
     * Spikes: every non-finite value, and every finite value above 3× the median of the positive
     * finite values before it, judged once there are three of those (so never the first three).
     */
    static int spikes(double[] xs) {
        int n = 0;
        for (int i = 0; i < xs.length; i++) {
            if (!Double.isFinite(xs[i])) {
                n++;
                continue;
            }
            double[] before = positive(xs, i);
            if (before.length >= 3 && xs[i] > 3 * median(before)) n++;
        }
        return n;
    }
}
