// Tolerance.java — element-wise comparison of a result with a reference: |a − e| ≤ atol + rtol·|e|
// for finite values, NaN and ±Inf matched exactly in kind; the failure lists the first ten
// mismatches with their index.
package dev.drmas.algo;

import static org.junit.jupiter.api.Assertions.fail;

public final class Tolerance {
    private Tolerance() {
    }

    public static void assertClose(String what, float[] actual, double[] expected, double atol, double rtol) {
        if (actual == null) fail(what + ": actual is null");
        double[] a = new double[actual.length];
        for (int i = 0; i < a.length; i++) a[i] = actual[i];
        assertClose(what, a, expected, atol, rtol);
    }

    public static void assertClose(String what, float[] actual, float[] expected, double atol, double rtol) {
        double[] e = new double[expected.length];
        for (int i = 0; i < e.length; i++) e[i] = expected[i];
        assertClose(what, actual, e, atol, rtol);
    }

    public static void assertClose(String what, long[] actual, long[] expected) {
        if (actual == null) fail(what + ": actual is null");
        double[] a = new double[actual.length], e = new double[expected.length];
        for (int i = 0; i < a.length; i++) a[i] = actual[i];
        for (int i = 0; i < e.length; i++) e[i] = expected[i];
        assertClose(what, a, e, 0, 0);
    }

    public static void assertClose(String what, double[] actual, double[] expected, double atol, double rtol) {
        assertClose(what, actual, expected, null, atol, rtol);
    }

    /**
     * As above with |a − e| ≤ atol + rtol·max(|e|, scale[i]): for sums whose terms carry a
     * relative error and may cancel, scale is the sum of the terms' absolute values.
     */
    public static void assertClose(String what, double[] actual, double[] expected, double[] scale, double atol,
                                   double rtol) {
        if (actual == null) fail(what + ": actual is null");
        if (actual.length != expected.length) {
            fail(what + ": length " + actual.length + ", expected " + expected.length);
        }
        StringBuilder sb = new StringBuilder();
        int bad = 0;
        for (int i = 0; i < actual.length; i++) {
            double a = actual[i], e = expected[i];
            boolean ok;
            if (Double.isNaN(e) || Double.isNaN(a)) ok = Double.isNaN(e) && Double.isNaN(a);
            else if (Double.isInfinite(e) || Double.isInfinite(a)) ok = a == e;
            else ok = Math.abs(a - e) <= atol + rtol * Math.max(Math.abs(e), scale == null ? 0 : scale[i]);
            if (!ok) {
                if (bad < 10) {
                    sb.append("\n  [").append(i).append("] actual ").append(a).append(", expected ").append(e)
                            .append(" (|diff| ").append(Math.abs(a - e)).append(')');
                }
                bad++;
            }
        }
        if (bad > 0) {
            fail(what + ": " + bad + " of " + actual.length + " elements differ (atol " + atol + ", rtol " + rtol
                    + ")" + sb + (bad > 10 ? "\n  ..." : ""));
        }
    }
}
