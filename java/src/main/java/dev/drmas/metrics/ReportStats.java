// ReportStats.java — the few statistics a run report states: a mean with its 95% interval over
// seeds (Student's t, so that three seeds are not read as more certain than they are), and how spiky
// a gradient-norm curve is (max / median over the steps, and the steps above 3× the median of the
// steps before them), the paper's Fig. 4 in numbers.
package dev.drmas.metrics;

import java.util.Arrays;

final class ReportStats {
    private ReportStats() {
    }

    /** Two-sided 97.5% quantiles of Student's t for 1..30 degrees of freedom. */
    private static final double[] T975 = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
        2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042};

    /** A mean and the half-width of its 95% interval (NaN for one value: no interval). */
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
    }

    static Interval interval(double[] xs) {
        int n = xs.length;
        if (n == 0) return new Interval(Double.NaN, Double.NaN, 0);
        double mean = Arrays.stream(xs).average().orElseThrow();
        if (n == 1) return new Interval(mean, Double.NaN, 1);
        double ss = 0;
        for (double x : xs) ss += (x - mean) * (x - mean);
        double sd = Math.sqrt(ss / (n - 1));
        double t = n - 1 <= T975.length ? T975[n - 2] : 1.96;
        return new Interval(mean, t * sd / Math.sqrt(n), n);
    }

    static double median(double[] xs) {
        double[] s = xs.clone();
        Arrays.sort(s);
        int n = s.length;
        return n == 0 ? Double.NaN : n % 2 == 1 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
    }

    /** max / median of a curve; NaN when it is empty or its median is 0. */
    static double maxOverMedian(double[] xs) {
        double med = median(xs);
        return xs.length == 0 || !(med > 0) ? Double.NaN : Arrays.stream(xs).max().orElseThrow() / med;
    }

    /** Steps whose value exceeds 3× the median of the steps before it (counted from the fourth step on). */
    static int spikes(double[] xs) {
        int n = 0;
        for (int i = 3; i < xs.length; i++) if (xs[i] > 3 * median(Arrays.copyOf(xs, i))) n++;
        return n;
    }
}
