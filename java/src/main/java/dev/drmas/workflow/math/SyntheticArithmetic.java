// SyntheticArithmetic.java — the built-in dataset, so that the default run needs no download:
// arithmetic expressions such as "What is 37+48-12?" with exact answers (BigInteger, usual operator
// precedence: * before + and -). Short on purpose: questions pass through a character-level
// tokenizer into tiny models. The knobs set the difficulty; the same seed gives the same tasks.
package dev.drmas.workflow.math;

import dev.drmas.env.Task;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.SplittableRandom;

/**
 * @param minOperands   fewest operands of an expression (≥ 2)
 * @param maxOperands   most operands (≤ 16)
 * @param minDigits     fewest digits of an operand (≥ 1; one digit means 0..9)
 * @param maxDigits     most digits of an operand (≤ 18)
 * @param operators     the operators to draw from, each of "+", "-", "*" at most once, e.g. "+-"
 * @param allowNegative whether a result may be negative; when not, expressions with a negative
 *                      result are drawn again
 */
public record SyntheticArithmetic(int minOperands, int maxOperands, int minDigits, int maxDigits, String operators,
        boolean allowNegative) {

    /** Two or three operands of one or two digits, + and -, results ≥ 0: learnable by a tiny model. */
    public static final SyntheticArithmetic DEFAULT = new SyntheticArithmetic(2, 3, 1, 2, "+-", false);

    /** Draws per task before giving up on finding a non-negative result. */
    static final int MAX_DRAWS_PER_TASK = 1000;

    public SyntheticArithmetic {
        if (minOperands < 2 || maxOperands < minOperands || maxOperands > 16) {
            throw new IllegalArgumentException("operands must satisfy 2 <= min_operands <= max_operands <= 16, got "
                    + minOperands + ".." + maxOperands);
        }
        if (minDigits < 1 || maxDigits < minDigits || maxDigits > 18) {
            throw new IllegalArgumentException("digits must satisfy 1 <= min_digits <= max_digits <= 18, got "
                    + minDigits + ".." + maxDigits);
        }
        if (operators == null || operators.isEmpty()) throw new IllegalArgumentException("operators must name at least one of + - *");
        for (int i = 0; i < operators.length(); i++) {
            char c = operators.charAt(i);
            if ("+-*".indexOf(c) < 0) {
                throw new IllegalArgumentException("operators may only contain + - *, got '" + c + "' in \"" + operators + "\"");
            }
            if (operators.indexOf(c) != i) throw new IllegalArgumentException("operator '" + c + "' is listed twice in \"" + operators + "\"");
        }
    }

    /** A training set and a held-out set with no question in common. */
    public record Split(List<Task> train, List<Task> test) {}

    /** {@code count} tasks drawn from {@code seed}, ids "arith-0", "arith-1", ...; repeats are possible. */
    public List<Task> generate(int count, long seed) {
        if (count < 0) throw new IllegalArgumentException("count must be >= 0, got " + count);
        SplittableRandom rng = new SplittableRandom(seed);
        List<Task> tasks = new ArrayList<>(count);
        for (int i = 0; i < count; i++) tasks.add(draw(rng, "arith-" + i));
        return tasks;
    }

    /**
     * A training set ("train-i", drawn from {@code seed}, repeats possible, like {@link #generate})
     * and a held-out set ("test-i", drawn from a second stream) whose questions are distinct and
     * none of which is in the training set, so evaluation never scores a memorised question.
     *
     * @throws IllegalArgumentException when the knobs allow too few distinct questions for the test set
     */
    public Split split(int trainCount, int testCount, long seed) {
        if (trainCount < 0 || testCount < 0) {
            throw new IllegalArgumentException("train and test counts must be >= 0, got " + trainCount + " and " + testCount);
        }
        SplittableRandom root = new SplittableRandom(seed);
        SplittableRandom trainRng = root.split(), testRng = root.split();
        List<Task> train = new ArrayList<>(trainCount);
        Set<String> seen = new HashSet<>();
        for (int i = 0; i < trainCount; i++) {
            Task t = draw(trainRng, "train-" + i);
            train.add(t);
            seen.add(t.question());
        }
        List<Task> test = new ArrayList<>(testCount);
        long budget = 50L * testCount + 1000;
        for (long tries = 0; test.size() < testCount; tries++) {
            if (tries == budget) {
                throw new IllegalArgumentException("found only " + test.size() + " held-out questions not in the training set after "
                        + budget + " draws, " + testCount + " wanted: these knobs allow too few distinct questions; "
                        + "widen the digits or operands, or ask for fewer tasks");
            }
            Task t = draw(testRng, "test-" + test.size());
            if (seen.add(t.question())) test.add(t);
        }
        return new Split(List.copyOf(train), List.copyOf(test));
    }

    /** One task from {@code rng}. */
    public Task draw(SplittableRandom rng, String id) {
        for (int attempt = 0; attempt < MAX_DRAWS_PER_TASK; attempt++) {
            int n = rng.nextInt(minOperands, maxOperands + 1);
            long[] values = new long[n];
            char[] ops = new char[n - 1];
            for (int i = 0; i < n; i++) values[i] = operand(rng);
            for (int i = 0; i < n - 1; i++) ops[i] = operators.charAt(rng.nextInt(operators.length()));
            BigInteger result = evaluate(values, ops);
            if (!allowNegative && result.signum() < 0) continue;
            StringBuilder q = new StringBuilder("What is ").append(values[0]);
            for (int i = 0; i < n - 1; i++) q.append(ops[i]).append(values[i + 1]);
            return new Task(id, q.append('?').toString(), result.toString());
        }
        throw new IllegalArgumentException("no expression with a non-negative result in " + MAX_DRAWS_PER_TASK
                + " draws: allow negative results, or use fewer operands or fewer '-' operators");
    }

    // A digit count uniform in [minDigits, maxDigits], then a value uniform among the numbers with
    // exactly that many digits (0..9 for one digit), so that longer numbers are as likely as short ones.
    private long operand(SplittableRandom rng) {
        int d = rng.nextInt(minDigits, maxDigits + 1);
        long lo = d == 1 ? 0 : pow10(d - 1);
        return rng.nextLong(lo, pow10(d));
    }

    private static long pow10(int e) {
        long p = 1;
        for (int i = 0; i < e; i++) p *= 10;
        return p;
    }

    /** The value of v0 op0 v1 op1 v2 ... with * before + and -, exactly. */
    static BigInteger evaluate(long[] values, char[] ops) {
        BigInteger total = BigInteger.ZERO;
        BigInteger term = BigInteger.valueOf(values[0]);
        boolean negative = false;
        for (int i = 0; i < ops.length; i++) {
            BigInteger v = BigInteger.valueOf(values[i + 1]);
            if (ops[i] == '*') {
                term = term.multiply(v);
            } else {
                total = negative ? total.subtract(term) : total.add(term);
                negative = ops[i] == '-';
                term = v;
            }
        }
        return negative ? total.subtract(term) : total.add(term);
    }
}
