// MathAnswersTest.java — hand-made answer pairs: extraction of the last box (nesting, escaped
// braces, truncation), forms that must be equivalent (integers, thousands groups, decimals,
// repeating decimals, fractions, signs, delimiters, LaTeX wrappers) and near misses that must not be
// (1/3 vs 0.33 and 0.333, 12 vs 1.2, the pair (1, 234) vs 1234, "2 3" vs 23).
package dev.drmas.workflow.math;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Optional;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

class MathAnswersTest {
    static Stream<Arguments> boxes() {
        return Stream.of(
                Arguments.of("Answer: \\boxed{5}", "5"),
                Arguments.of("\\boxed{\\frac{1}{2}}", "\\frac{1}{2}"),
                Arguments.of("first \\boxed{3}, then \\boxed{4}.", "4"),
                Arguments.of("\\boxed{\\frac{\\sqrt{3}}{2}} done", "\\frac{\\sqrt{3}}{2}"),
                Arguments.of("set \\boxed{\\{1,2\\}}", "\\{1,2\\}"),
                Arguments.of("so $\\boxed {7}$", "7"),
                Arguments.of("so $\\boxed 42$ ok", "42"),
                Arguments.of("\\boxed{}", ""),
                Arguments.of("\\boxed{-12}\\boxedx", "-12"));
    }

    @ParameterizedTest
    @MethodSource("boxes")
    void lastBoxedTakesTheLastBalancedBox(String text, String content) {
        assertEquals(Optional.of(content), MathAnswers.lastBoxed(text));
    }

    @Test
    void noBoxOrAnUnclosedLastBoxIsNoAnswer() {
        assertEquals(Optional.empty(), MathAnswers.lastBoxed("The answer is 5."));
        assertEquals(Optional.empty(), MathAnswers.lastBoxed(""));
        assertEquals(Optional.empty(), MathAnswers.lastBoxed(null));
        // truncated output: the last box never closes, and the earlier one was abandoned
        assertEquals(Optional.empty(), MathAnswers.lastBoxed("\\boxed{3} no wait \\boxed{\\frac{1}{2}"));
        assertEquals(Optional.empty(), MathAnswers.lastBoxed("ends with \\boxed"));
        assertEquals(Optional.empty(), MathAnswers.lastBoxed("\\fbox{5} \\boxedfoo"));
    }

    static Stream<Arguments> same() {
        return Stream.of(
                // integers
                Arguments.of("5", "5"),
                Arguments.of("007", "7"),
                Arguments.of("+5", "5"),
                Arguments.of("1,000", "1000"),
                Arguments.of("12,345,678", "12345678"),
                Arguments.of("1{,}000", "1000"),
                Arguments.of("-0", "0"),
                Arguments.of(" 42 ", "42"),
                Arguments.of("- 3", "-3"),
                // digit groups set apart by a blank or a thin space: thousands
                Arguments.of("1 000 000", "1000000"),
                Arguments.of("12\\,345", "12345"),
                Arguments.of("-1\\, 000", "-1000"),
                Arguments.of("1~000", "1000"),
                Arguments.of("1 234.567 8", "1234.5678"),
                // decimals
                Arguments.of("0.50", "0.5"),
                Arguments.of(".5", "0.5"),
                Arguments.of("2.0", "2"),
                Arguments.of("2.", "2"),
                Arguments.of("-.25", "-1/4"),
                Arguments.of("1,000.5", "2001/2"),
                Arguments.of("1e3", "1000"),
                Arguments.of("2.5E-1", "1/4"),
                // repeating decimals
                Arguments.of("0.\\overline{3}", "1/3"),
                Arguments.of("0.\\overline{142857}", "\\frac{1}{7}"),
                Arguments.of("0.1\\overline{6}", "\\frac{1}{6}"),
                Arguments.of("$1.\\overline{3}$", "4/3"),
                Arguments.of("-.\\overline{3}", "-\\frac13"),
                Arguments.of("0.12\\overline{34}", "611/4950"),
                Arguments.of("0.\\bar{3}", "0.\\overline3"),
                Arguments.of("0.\\overline{9}", "1"),
                // fractions and signs anywhere
                Arguments.of("1/2", "0.5"),
                Arguments.of("\\frac{2}{4}", "0.5"),
                Arguments.of("\\dfrac{1}{2}", "\\frac12"),
                Arguments.of("\\tfrac{3}{6}", "1/2"),
                Arguments.of("-\\frac{1}{2}", "\\frac{-1}{2}"),
                Arguments.of("\\frac{1}{-2}", "-1/2"),
                Arguments.of("-1/2", "-0.5"),
                Arguments.of("-\\frac{-1}{2}", "0.5"),
                Arguments.of("\\frac{6}{3}", "2"),
                Arguments.of("\\frac{\\frac{1}{2}}{2}", "0.25"),
                Arguments.of("\\frac 1 2", "1/2"),
                Arguments.of("(-1/2)", "-0.5"),
                Arguments.of("\\left( \\frac{1}{2} \\right)", "0.5"),
                Arguments.of("{3}", "3"),
                // delimiters, wrappers, units of typesetting
                Arguments.of("$5$", "5"),
                Arguments.of("$$\\frac{1}{2}$$", "0.5"),
                Arguments.of("\\(7\\)", "7"),
                Arguments.of("\\text{5}", "5"),
                Arguments.of("\\mathrm{12}", "12"),
                Arguments.of("5.", "5"),
                Arguments.of("$5$.", "5"),
                Arguments.of("\\(5\\).", "5"),
                Arguments.of("$\\frac{1}{2}.$", "0.5"),
                Arguments.of("$x = 5$.", "5"),
                Arguments.of("\\boxed{9}", "9"),
                Arguments.of("x = 5", "5"),
                // the variable restated with set membership; one spelling of each relation
                Arguments.of("x \\in [-2,7]", "[-2, 7]"),
                Arguments.of("$x\\in(0,1)$", "(0,1)"),
                Arguments.of("x \\leq 3", "x\\le 3"),
                Arguments.of("x \\geqslant 2", "x \\ge 2"),
                Arguments.of("x \u2264 3", "x \\le 3"),
                Arguments.of("a \\neq b", "a \\ne b"),
                // a bare list of answers against a set of them
                Arguments.of("1, 2, 3", "\\{3, 2, 1\\}"),
                Arguments.of("\\{-1, 2\\}", "2, -1"),
                Arguments.of("\\{1 \\pm \\sqrt{2}, 3\\}", "3, 1 - \\sqrt{2}, 1 + \\sqrt{2}"),
                Arguments.of("90^\\circ", "90"),
                Arguments.of("90\u00b0", "90"),
                Arguments.of("$90^{\\circ}$", "90 \u00b0"),
                Arguments.of("50\\%", "50"),
                Arguments.of("\u22124", "-4"),
                Arguments.of("1\\,000", "1000"),
                Arguments.of("\\displaystyle\\frac{3}{4}", "0.75"),
                // not numbers: compared as cleaned strings
                Arguments.of("\\text{Paris}.", "Paris"),
                Arguments.of("$\\sqrt{2}$", "\\sqrt{2}"),
                Arguments.of("\\sqrt 2", "\\sqrt2"),
                Arguments.of("\\left(1, 2\\right)", "(1,2)"),
                Arguments.of("(1, 234)", "(1,234)"),
                Arguments.of("2, 500", "2 ,  500"),
                Arguments.of("\\dfrac{\\pi}{2}", "\\frac{\\pi}{2}"),
                Arguments.of("\\textbf{(B)}", "(B)"),
                Arguments.of("a \\rightarrow b", "a\\rightarrowb"),
                // verl's strip_string: a unit in \text{ ...} after the value goes (remove_right_units)
                Arguments.of("5\\text{ cm}", "5"),
                Arguments.of("12 \\text{ apples}", "12"),
                Arguments.of("12 \\text{apples}", "12"),
                Arguments.of("3\\text{ m}^2", "3"),
                Arguments.of("$10\\text{ inches}$.", "10"),
                Arguments.of("\\frac{\\sqrt{3}}{2}\\text{ cm}", "\\frac{\\sqrt3}{2}"),
                // ... and a one-character argument gets its braces (fix_sqrt, fix_fracs)
                Arguments.of("\\sqrt2", "\\sqrt{2}"),
                Arguments.of("3\\sqrt2", "3\\sqrt{2}"),
                Arguments.of("\\sqrt x", "\\sqrt{x}"),
                Arguments.of("\\frac{\\sqrt3}{2}", "\\frac{\\sqrt{3}}{2}"),
                Arguments.of("\\frac1x", "\\frac{1}{x}"),
                Arguments.of("\\dfrac{\\pi}2", "\\frac{\\pi}{2}"),
                Arguments.of("2\\sqrt{2}+\\frac12", "2\\sqrt2+\\frac{1}{2}"),
                // a matrix's row break \\ with or without blanks around it (the blank is no "\ ")
                Arguments.of("\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}", "\\begin{pmatrix}1\\\\2\\end{pmatrix}"),
                Arguments.of("\\begin{pmatrix} -1 \\\\ \\frac{1}{2} \\end{pmatrix}", "\\begin{pmatrix}-1\\\\\\frac12\\end{pmatrix}"));
    }

    @ParameterizedTest
    @MethodSource("same")
    void equivalentForms(String a, String b) {
        assertTrue(MathAnswers.equivalent(a, b), a + " vs " + b + ": " + MathAnswers.normalize(a) + " vs " + MathAnswers.normalize(b));
        assertTrue(MathAnswers.equivalent(b, a), "symmetric: " + b + " vs " + a);
    }

    static Stream<Arguments> different() {
        return Stream.of(
                Arguments.of("x \\le 3", "x \\ge 3"),
                Arguments.of("x \\in (0,1)", "[0,1]"),
                Arguments.of("x \\leq 3", "x < 3"),
                Arguments.of("1, 2, 3", "\\{1, 2\\}"),
                Arguments.of("1, 2", "(1, 2)"),
                Arguments.of("1/3", "0.33"),
                Arguments.of("1/3", "0.333333333333"),
                // a repeating decimal is exact, and a finite one is no repeating one
                Arguments.of("0.333", "0.\\overline{3}"),
                Arguments.of("0.\\overline{3}", "0.3"),
                Arguments.of("0.\\overline{16}", "\\frac{1}{6}"),
                Arguments.of("0.\\overline{}", "0"),
                // digit groups that are no thousands groups are no number
                Arguments.of("2 3", "23"),
                Arguments.of("2\\,3", "23"),
                Arguments.of("12 34", "1234"),
                Arguments.of("1 0000", "10000"),
                Arguments.of("1234 567", "1234567"),
                Arguments.of("0.12 345", "0.12345"),
                Arguments.of("12", "1.2"),
                Arguments.of("\\frac{1}{2}", "2"),
                Arguments.of("\\frac{1}{2}", "-\\frac{1}{2}"),
                Arguments.of("-5", "5"),
                Arguments.of("1,000", "1"),
                Arguments.of("1,00", "100"),
                Arguments.of("(1,2)", "12"),
                // a tuple or a list, not a thousands group
                Arguments.of("(1, 234)", "1234"),
                Arguments.of("(1,234)", "1234"),
                Arguments.of("\\left(1,234\\right)", "1234"),
                Arguments.of("2, 500", "2500"),
                // "2+3" answering "5" is in MathAnswerFormsTest (one-sided: 5 answering "2+3" scores)
                Arguments.of("1/0", "0"),
                Arguments.of("0.1", "0.10000001"),
                Arguments.of("10", "100"),
                Arguments.of("\\sqrt{2}", "2"),
                Arguments.of("x", "X"),
                Arguments.of("Paris", "London"),
                Arguments.of("5", ""),
                Arguments.of("1e3", "13"),
                // a unit is dropped only at the end and only after a blank; \text between values is text
                Arguments.of("5\\text{ or }6", "5"),
                Arguments.of("5\\text{ or }6", "6"),
                // \sqrt23 is \sqrt{2}3, and a root's index is no argument to brace
                Arguments.of("\\sqrt23", "\\sqrt{23}"),
                Arguments.of("\\sqrt[3]{2}", "\\sqrt{2}"),
                Arguments.of("\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}", "\\begin{pmatrix}12\\end{pmatrix}"));
    }

    @ParameterizedTest
    @MethodSource("different")
    void nearMissesAreNotEquivalent(String a, String b) {
        assertFalse(MathAnswers.equivalent(a, b), a + " vs " + b + ": " + MathAnswers.normalize(a) + " vs " + MathAnswers.normalize(b));
        assertFalse(MathAnswers.equivalent(b, a), "symmetric: " + b + " vs " + a);
    }

    @Test
    void deepNestingIsNotANumberAndNoStackOverflow() {
        // a model can write a box of tens of thousands of parentheses; the reward must not die of it
        int deep = 100_000;
        String parens = "(".repeat(deep) + "1" + ")".repeat(deep);
        assertFalse(MathAnswers.equivalent(parens, "1"));
        assertEquals(0.0, MathReward.episodeReward("\\boxed{" + parens + "}", "1"));
        assertFalse(MathAnswers.equivalent("\\frac{".repeat(deep) + "1" + "}{2}".repeat(deep), "0"));
        assertFalse(MathAnswers.equivalent("-{".repeat(deep) + "1" + "}".repeat(deep), "1"));
        assertFalse(MathAnswers.equivalent("\\sqrt{".repeat(deep) + "2" + "}".repeat(deep), "\\sqrt2"));
        // nesting as deep as answers have still reads as a number
        assertTrue(MathAnswers.equivalent("(".repeat(20) + "\\frac{1}{2}" + ")".repeat(20), "0.5"));
    }

    @Test
    void emptyAndNullAnswersNeverMatch() {
        assertFalse(MathAnswers.equivalent("", ""));
        assertFalse(MathAnswers.equivalent("$ $", " "));
        assertFalse(MathAnswers.equivalent(null, "5"));
        assertFalse(MathAnswers.equivalent("5", null));
    }

    @Test
    void normalizeGivesReducedFractionsForNumbersAndCleanTextOtherwise() {
        assertEquals("1/2", MathAnswers.normalize("0.50"));
        assertEquals("-1/2", MathAnswers.normalize("\\frac{2}{-4}"));
        assertEquals("1000", MathAnswers.normalize("$1,000$"));
        assertEquals("0", MathAnswers.normalize("-0.0"));
        assertEquals("123456789012345678901234567890", MathAnswers.normalize("123,456,789,012,345,678,901,234,567,890"));
        assertEquals("Paris", MathAnswers.normalize(" \\text{Paris}. "));
        assertEquals("\\frac{x}{2}", MathAnswers.normalize("\\dfrac{x}{2}"));
        assertEquals("(1,2)", MathAnswers.normalize("\\left( 1, 2 \\right)"));
    }
}
