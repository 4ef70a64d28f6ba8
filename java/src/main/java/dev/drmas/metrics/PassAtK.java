// PassAtK.java — evaluation scores from n sampled answers per task of which c are correct:
// avg@n (mean correctness) and the unbiased pass@k of Chen et al. 2021 ("Evaluating Large
// Language Models Trained on Code"), the chance that at least one of k answers drawn without
// replacement from the n is correct, averaged over tasks.
package dev.drmas.metrics;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

public final class PassAtK {
    private PassAtK() {}

    /** One task's samples: n answers, c of them correct. */
    public record Counts(int n, int c) {
        public Counts {
            if (n < 1) throw new IllegalArgumentException("a task needs at least one sample, got n=" + n);
            if (c < 0 || c > n) throw new IllegalArgumentException("correct count must be in [0, n=" + n + "], got c=" + c);
        }

        public static Counts of(boolean[] correct) {
            int c = 0;
            for (boolean b : correct) if (b) c++;
            return new Counts(correct.length, c);
        }
    }

    /**
     * pass@k = 1 − C(n−c, k) / C(n, k), as the product 1 − Π_{i=n−c+1..n} (1 − k/i) (the paper's
     * numpy form): the binomials overflow a double from n ≈ 1030, the product does not. The product
     * is summed in logs and the subtraction done by expm1, so that a small pass@k (few correct,
     * product near 1) keeps its relative precision instead of cancelling in 1 − 0.9995….
     */
    public static double passAtK(int n, int c, int k) {
        new Counts(n, c);
        if (k < 1 || k > n) throw new IllegalArgumentException("k must be in [1, n=" + n + "], got k=" + k);
        if (n - c < k) return 1.0; // every k-subset holds a correct answer
        if (c == 0) return 0.0;    // not -expm1(0) = -0.0, which JSON would show as "-0.0"
        double logAllWrong = 0.0; // log of the chance that a k-subset holds no correct sample
        for (int i = n - c + 1; i <= n; i++) logAllWrong += Math.log1p(-(double) k / i);
        return -Math.expm1(logAllWrong);
    }

    /** avg@n: the fraction of a task's samples that are correct. */
    public static double avgAtK(int n, int c) {
        new Counts(n, c);
        return (double) c / n;
    }

    /** pass@k averaged over tasks (each task weighs the same, whatever its n). */
    public static double meanPassAtK(List<Counts> tasks, int k) {
        requireTasks(tasks);
        double sum = 0;
        for (Counts t : tasks) sum += passAtK(t.n(), t.c(), k);
        return sum / tasks.size();
    }

    /** avg@n averaged over tasks. */
    public static double meanAvgAtK(List<Counts> tasks) {
        requireTasks(tasks);
        double sum = 0;
        for (Counts t : tasks) sum += avgAtK(t.n(), t.c());
        return sum / tasks.size();
    }

    /**
     * The scalars of one evaluation: {@code <prefix>avg@<n>} and {@code <prefix>pass@<k>} for each
     * k, e.g. {@code eval/avg@4, eval/pass@1, eval/pass@4}. Every task must have the same n, which
     * the avg@ key names.
     */
    public static Map<String, Double> scalars(String prefix, List<Counts> tasks, int... ks) {
        requireTasks(tasks);
        int n = tasks.getFirst().n();
        for (Counts t : tasks) {
            if (t.n() != n) {
                throw new IllegalArgumentException("tasks have different sample counts (" + n + " and " + t.n()
                        + "); avg@n needs one n");
            }
        }
        var out = new LinkedHashMap<String, Double>();
        out.put(prefix + "avg@" + n, meanAvgAtK(tasks));
        for (int k : ks) out.put(prefix + "pass@" + k, meanPassAtK(tasks, k));
        return out;
    }

    private static void requireTasks(List<Counts> tasks) {
        if (tasks.isEmpty()) throw new IllegalArgumentException("no tasks to score");
    }
}
