// ArithmeticData.java — `data.synthetic:` of the math workflows: the difficulty knobs of the built-in
// arithmetic task generator, and its own seed, so that runs with different run.seed still train and
// evaluate on the same tasks (their results are then comparable).
package dev.drmas.workflow.math;

import dev.drmas.config.Check;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * @param operands      the most numbers an expression has (each draws 2..operands), 2..6; default 2
 * @param digits        the most digits a number has (each draws 1..digits), 1..9; default 2
 * @param operators     the operators drawn from, a non-empty subset of {@code + - *}; default
 *                      {@code [+, -]} (the generator has no division)
 * @param allowNegative whether answers may be negative; default false
 * @param trainSize     training tasks generated; default 5000
 * @param testSize      held-out tasks generated (disjoint from the training tasks); default 200
 * @param seed          the generator's seed; default 1234
 */
public record ArithmeticData(int operands, int digits, List<String> operators, boolean allowNegative, int trainSize,
                            int testSize, long seed) {
    private static final Set<String> OPERATORS = Set.of("+", "-", "*");

    public ArithmeticData {
        Check.that(operands >= 2 && operands <= 6, "operands", "must be in [2, 6], got " + operands);
        Check.that(digits >= 1 && digits <= 9, "digits", "must be in [1, 9], got " + digits);
        Check.given(operators, "operators");
        Check.that(!operators.isEmpty(), "operators", "must list at least one of + - *");
        Set<String> seen = new HashSet<>();
        for (int i = 0; i < operators.size(); i++) {
            String op = operators.get(i);
            Check.that(op != null && OPERATORS.contains(op), "operators[" + i + "]", "'" + op + "' is not one of + - *");
            Check.that(seen.add(op), "operators[" + i + "]", "'" + op + "' is listed twice");
        }
        operators = List.copyOf(operators);
        Check.positive(trainSize, "train_size");
        Check.positive(testSize, "test_size");
    }

    public static ArithmeticData defaults() {
        return new ArithmeticData(2, 2, List.of("+", "-"), false, 5000, 200, 1234);
    }
}
