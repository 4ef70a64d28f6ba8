// SyntheticArithmeticTest.java — the built-in generator: hand-computed values with precedence and
// beyond 64 bits, every generated answer re-derived by an independent evaluator written here, the
// knobs respected, determinism per seed, and held-out sets disjoint from the training set.
package dev.drmas.workflow.math;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.env.Task;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

class SyntheticArithmeticTest {
    static final Pattern QUESTION = Pattern.compile("What is (\\d+(?:[+*-]\\d+)+)\\?");

    @Test
    void evaluateAppliesPrecedenceExactly() {
        assertEquals(BigInteger.valueOf(14), SyntheticArithmetic.evaluate(new long[] {2, 3, 4}, new char[] {'+', '*'}));
        assertEquals(BigInteger.valueOf(5), SyntheticArithmetic.evaluate(new long[] {10, 2, 3}, new char[] {'-', '-'}));
        assertEquals(BigInteger.valueOf(-14), SyntheticArithmetic.evaluate(new long[] {2, 3, 4, 5}, new char[] {'*', '-', '*'}));
        assertEquals(BigInteger.valueOf(-3), SyntheticArithmetic.evaluate(new long[] {0, 1, 2, 1}, new char[] {'-', '*', '-'}));
        // (10^18 - 1)^2 = 10^36 - 2*10^18 + 1, far beyond a long
        assertEquals(new BigInteger("999999999999999998000000000000000001"),
                SyntheticArithmetic.evaluate(new long[] {999999999999999999L, 999999999999999999L}, new char[] {'*'}));
    }

    // The reference: split the question text at + and -, multiply within each term, add the terms.
    static BigInteger reference(String expr) {
        BigInteger total = BigInteger.ZERO;
        Matcher m = Pattern.compile("([+-]?)([\\d*]+)").matcher(expr);
        int end = 0;
        while (m.find()) {
            assertEquals(end, m.start(), "unparsed text in " + expr);
            end = m.end();
            BigInteger term = BigInteger.ONE;
            for (String f : m.group(2).split("\\*")) term = term.multiply(new BigInteger(f));
            total = m.group(1).equals("-") ? total.subtract(term) : total.add(term);
        }
        assertEquals(expr.length(), end);
        return total;
    }

    @Test
    void everyAnswerMatchesItsQuestionAndTheKnobs() {
        SyntheticArithmetic g = new SyntheticArithmetic(2, 4, 1, 3, "+-*", true);
        Set<Integer> operandCounts = new HashSet<>();
        Set<Integer> digitCounts = new HashSet<>();
        Set<Character> ops = new HashSet<>();
        boolean sawNegative = false;
        for (Task t : g.generate(500, 11)) {
            Matcher m = QUESTION.matcher(t.question());
            assertTrue(m.matches(), t.question());
            String expr = m.group(1);
            assertEquals(reference(expr).toString(), t.answer(), t.question());
            String[] operands = expr.split("[+*-]");
            operandCounts.add(operands.length);
            for (String o : operands) {
                digitCounts.add(o.length());
                assertTrue(o.length() == 1 || o.charAt(0) != '0', "leading zero in " + t.question());
            }
            for (char c : expr.toCharArray()) if (!Character.isDigit(c)) ops.add(c);
            sawNegative |= t.answer().startsWith("-");
        }
        assertEquals(Set.of(2, 3, 4), operandCounts);
        assertEquals(Set.of(1, 2, 3), digitCounts);
        assertEquals(Set.of('+', '-', '*'), ops);
        assertTrue(sawNegative);
    }

    @Test
    void nonNegativeResultsOnlyWhenAskedAndOnlyTheChosenOperators() {
        SyntheticArithmetic g = new SyntheticArithmetic(3, 3, 2, 2, "-", false);
        for (Task t : g.generate(300, 5)) {
            assertFalse(t.answer().startsWith("-"), t.question() + " = " + t.answer());
            assertTrue(t.question().matches("What is \\d\\d-\\d\\d-\\d\\d\\?"), t.question());
        }
    }

    @Test
    void defaultQuestionsAreShort() {
        for (Task t : SyntheticArithmetic.DEFAULT.generate(200, 1)) {
            assertTrue(t.question().length() <= "What is 99+99-99?".length(), t.question());
            assertFalse(t.answer().startsWith("-"), t.question());
        }
    }

    @Test
    void sameSeedSameTasksOtherSeedOtherTasks() {
        SyntheticArithmetic g = SyntheticArithmetic.DEFAULT;
        List<Task> a = g.generate(50, 42);
        assertEquals(a, g.generate(50, 42));
        assertNotEquals(a, g.generate(50, 43));
        assertEquals("arith-0", a.get(0).id());
        assertEquals("arith-49", a.get(49).id());
        assertEquals(List.of(), g.generate(0, 42));
    }

    @Test
    void splitIsDisjointByQuestionAndDeterministic() {
        SyntheticArithmetic g = new SyntheticArithmetic(2, 2, 1, 1, "+-", true); // only 200 distinct questions
        SyntheticArithmetic.Split s = g.split(300, 40, 7);
        assertEquals(300, s.train().size());
        assertEquals(40, s.test().size());
        Set<String> trainQ = new HashSet<>();
        for (Task t : s.train()) trainQ.add(t.question());
        Set<String> testQ = new HashSet<>();
        List<String> testIds = new ArrayList<>();
        for (Task t : s.test()) {
            assertFalse(trainQ.contains(t.question()), t.question() + " is in both sets");
            assertTrue(testQ.add(t.question()), t.question() + " twice in the test set");
            testIds.add(t.id());
        }
        assertEquals("test-0", testIds.get(0));
        assertEquals("test-39", testIds.get(39));
        assertEquals("train-299", s.train().get(299).id());
        assertEquals(s, g.split(300, 40, 7));
    }

    @Test
    void splitTooLargeForTheQuestionSpaceIsAnError() {
        SyntheticArithmetic g = new SyntheticArithmetic(2, 2, 1, 1, "+", false); // 100 distinct questions
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> g.split(10, 100, 1));
        assertTrue(e.getMessage().contains("too few distinct questions"), e.getMessage());
    }

    @Test
    void badKnobsAreRejectedWithTheirNames() {
        assertEquals("operands must satisfy 2 <= min_operands <= max_operands <= 16, got 1..3",
                assertThrows(IllegalArgumentException.class, () -> new SyntheticArithmetic(1, 3, 1, 2, "+", true)).getMessage());
        assertEquals("digits must satisfy 1 <= min_digits <= max_digits <= 18, got 3..2",
                assertThrows(IllegalArgumentException.class, () -> new SyntheticArithmetic(2, 3, 3, 2, "+", true)).getMessage());
        assertEquals("operators may only contain + - *, got '/' in \"+/\"",
                assertThrows(IllegalArgumentException.class, () -> new SyntheticArithmetic(2, 3, 1, 2, "+/", true)).getMessage());
        assertEquals("operator '+' is listed twice in \"+-+\"",
                assertThrows(IllegalArgumentException.class, () -> new SyntheticArithmetic(2, 3, 1, 2, "+-+", true)).getMessage());
        assertThrows(IllegalArgumentException.class, () -> new SyntheticArithmetic(2, 3, 1, 2, "", true));
        assertThrows(IllegalArgumentException.class, () -> new SyntheticArithmetic(2, 17, 1, 2, "+", true));
        assertThrows(IllegalArgumentException.class, () -> new SyntheticArithmetic(2, 3, 1, 19, "+", true));
    }

    @Test
    void impossibleNonNegativeConstraintIsAnError() {
        // 16 one-digit operands all subtracted from the first: a non-negative result is (nearly) impossible
        SyntheticArithmetic g = new SyntheticArithmetic(16, 16, 1, 1, "-", false);
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> g.generate(5, 3));
        assertTrue(e.getMessage().startsWith("no expression with a non-negative result in 1000 draws"), e.getMessage());
    }
}
