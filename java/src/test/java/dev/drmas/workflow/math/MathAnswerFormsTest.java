// MathAnswerFormsTest.java — right answers written in another form than the ground truth (each of
// these was scored 0 by the string-and-number checker alone; most were found by running MATH500's
// answers and hand-made variants through the Dr. MAS reference's grader): thousands with \!, units,
// base subscripts, choice letters, mixed numbers, case of words, "and"/"or" lists, sets in any
// order, \pm (in a set, in a fraction), matrices, and formulas equal after algebra. And the near
// misses that must stay 0 next to each of them; and replies of a hundred thousand characters.
package dev.drmas.workflow.math;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

class MathAnswerFormsTest {
    static Stream<Arguments> same() {
        return Stream.of(
                // thousands separated by ",\!" (MATH's typesetting)
                Arguments.of("11,\\! 111,\\! 111,\\! 100", "11111111100"),
                Arguments.of("11,\\! 111,\\! 111,\\! 100", "11,111,111,100"),
                Arguments.of("11,\\!111,\\!111,\\!100", "11,\\! 111,\\! 111,\\! 100"),
                Arguments.of("\\$32,\\!348", "32348"),
                Arguments.of("10,\\!080", "10080"),
                // units without a blank inside the braces, \mathrm, bare unit words
                Arguments.of("5\\text{cm}", "5"),
                Arguments.of("5\\,\\text{cm}", "5"),
                Arguments.of("5 \\mathrm{cm}", "5"),
                Arguments.of("5\\,\\mathrm{cm}", "5"),
                Arguments.of("5 cm", "5"),
                Arguments.of("5\\ \\text{cm}", "5"),
                Arguments.of("25 dollars", "25"),
                Arguments.of("864\\mbox{inches}^2", "864 \\mbox{ inches}^2"),
                Arguments.of("\\frac{270}7\\text{degrees}", "\\frac{270}7\\text{ degrees}"),
                Arguments.of("5.4\\text{cents}", "5.4 \\text{ cents}"),
                Arguments.of("5\\quad", "5"),
                Arguments.of("5 in.", "5"),
                Arguments.of("5 in", "5"),
                Arguments.of("\\frac{1}{2} in.", "0.5"),
                // base subscripts
                Arguments.of("52_{8}", "52_8"),
                Arguments.of("4210_5", "4210_{5}"),
                // multiple choice
                Arguments.of("C", "\\text{(C)}"),
                Arguments.of("\\text{C}", "\\text{(C)}"),
                Arguments.of("(C)", "\\text{(C)}"),
                Arguments.of("\\textbf{(C)}", "\\text{(C)}"),
                // mixed numbers
                Arguments.of("\\frac{9}{5}", "1\\frac{4}{5}"),
                Arguments.of("1.8", "1\\frac{4}{5}"),
                Arguments.of("1 \\frac{4}{5}", "1\\frac{4}{5}"),
                Arguments.of("137.5", "137 \\frac{1}{2}"),
                Arguments.of("\\frac{275}{2}", "137 \\frac{1}{2}"),
                Arguments.of("2 1/4", "\\frac{9}{4}"),
                Arguments.of("-2\\frac{1}{4}", "-2.25"),
                // words: case does not matter where one side is \text
                Arguments.of("\\text{East}", "\\text{east}"),
                Arguments.of("\\text{Even}", "\\text{even}"),
                Arguments.of("\\text{Ellipse}", "\\text{ellipse}"),
                // ... and where both sides spell them as prose, \text or not
                Arguments.of("Yes", "yes"),
                Arguments.of("Even", "even"),
                Arguments.of("New York", "new york"),
                // "and", "or" lists
                Arguments.of("1 \\text{ and } 2", "1, 2"),
                Arguments.of("1 \\text{ or } 2", "1, 2"),
                Arguments.of("x = 1 \\text{ or } x = 2", "1,2"),
                Arguments.of("0.5, 3", "\\frac{1}{2}, 3"),
                Arguments.of("\\text{A}, \\text{C}", "\\text{A, C}"),
                Arguments.of("a_{10} = 89", "89"),
                // a bare list or a set \{\} in any order; \pm is two elements
                Arguments.of("2, 1", "1, 2"),
                Arguments.of("1, -2", "-2, 1"),
                Arguments.of("x = 1 \\text{ or } x = -2", "-2, 1"),
                Arguments.of("\\{2, 1\\}", "\\{1,2\\}"),
                Arguments.of("\\pm 2", "2, -2"),
                Arguments.of("-1, 1", "\\pm 1"),
                Arguments.of("1 + \\sqrt{19}, 1 - \\sqrt{19}", "1 \\pm \\sqrt{19}"),
                Arguments.of("\\{-2, 1 \\pm \\sqrt{5}\\}", "\\{1\\pm\\sqrt{5},-2\\}"),
                // ... also as a set's one element, inside a fraction or parentheses, as \mp or U+00B1
                Arguments.of("\\{\\pm 2\\}", "\\{2, -2\\}"),
                Arguments.of("\\{\\pm 2\\}", "-2, 2"),
                Arguments.of("\\pm 2", "\\{\\pm 2\\}"),
                Arguments.of("x \\in \\{\\pm \\sqrt{3}\\}", "\\sqrt3, -\\sqrt3"),
                Arguments.of("\\frac{1 \\pm \\sqrt{5}}{2}", "\\frac{1+\\sqrt5}{2}, \\frac{1-\\sqrt5}{2}"),
                Arguments.of("\\frac{-3 \\mp \\sqrt{5}}{2}", "\\frac{-3-\\sqrt{5}}{2}, \\frac{-3+\\sqrt{5}}{2}"),
                Arguments.of("(1 \\pm \\sqrt{5})/2", "\\left\\{\\frac{1 \\pm \\sqrt{5}}{2}\\right\\}"),
                Arguments.of("\\frac{1 \\pm \\sqrt{5}}{2}", "\\frac{1}{2} \\pm \\frac{\\sqrt{5}}{2}"),
                Arguments.of("\u00b1 3", "3, -3"),
                Arguments.of("(3,4), (1,2)", "(1,2), (3,4)"),
                // matrices entry by entry, pmatrix or bmatrix
                Arguments.of("\\begin{pmatrix} -\\frac{1}{3} \\\\ \\frac{2}{3} \\\\ \\frac{5}{3} \\end{pmatrix}",
                        "\\begin{pmatrix} -1/3 \\\\ 2/3 \\\\ 5/3 \\end{pmatrix}"),
                Arguments.of("\\begin{pmatrix} \\dfrac{1}{5} \\\\ -\\dfrac{18}{5} \\end{pmatrix}", "\\begin{pmatrix} 1/5 \\\\ -18/5 \\end{pmatrix}"),
                Arguments.of("\\begin{bmatrix} 1 \\\\ 2 \\end{bmatrix}", "\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}"),
                Arguments.of("\\begin{pmatrix} 0.5 & x+1 \\\\ 3 & 0 \\end{pmatrix}", "\\begin{pmatrix} \\frac12 & 1+x \\\\ 3 & 0 \\end{pmatrix}"),
                // formulas equal after algebra
                Arguments.of("11 + 11\\sqrt{5}", "11 \\sqrt{5} + 11"),
                Arguments.of("11(1+\\sqrt{5})", "11 \\sqrt{5} + 11"),
                Arguments.of("2\\pi + 18", "18+2\\pi"),
                Arguments.of("3 - 13x", "-13x+3"),
                Arguments.of("(b+2)(a+5)", "(a+5)(b+2)"),
                Arguments.of("\\frac{9a+11}{20}", "\\frac{11+9a}{20}"),
                Arguments.of("2(k+1)", "2k+2"),
                Arguments.of("-q + p", "p - q"),
                Arguments.of("\\dfrac{1}{\\sqrt{3}}", "\\frac{\\sqrt{3}}{3}"),
                Arguments.of("\\cot(x)", "\\cot x"),
                Arguments.of("\\cot{x}", "\\cot x"),
                Arguments.of("\\sqrt{2}/2", "\\frac{\\sqrt{2}}{2}"),
                Arguments.of("(x+1)^2", "x^2+2x+1"),
                Arguments.of("x^{-1}", "\\frac{1}{x}"),
                Arguments.of("\\sqrt{8}", "2\\sqrt2"),
                Arguments.of("\\sqrt{117}", "3\\sqrt{13}"),
                Arguments.of("2^{1/3}", "\\sqrt[3]{2}"),
                Arguments.of("\\pi \\cdot 2", "2\\pi"),
                Arguments.of("-5i+6", "6-5i"),
                Arguments.of("\\frac{1+\\sqrt{3}i}{2}", "\\frac{1}{2}+\\frac{\\sqrt{3}}{2}i"),
                Arguments.of("\\frac{\\ln 3}{\\ln 2}", "\\log_2 3"),
                Arguments.of("2\\sin x \\cos x", "\\sin x \\cdot 2\\cos x"),
                Arguments.of("y = 3 + 2x", "y=2x+3"),
                // numbers in scientific notation: exact
                Arguments.of("1.2 \\times 10^5", "120000"),
                Arguments.of("1.2\\cdot 10^{5}", "120000"),
                Arguments.of("6.72 \\times 10^{-5}", ".0000672"),
                Arguments.of("10^6", "1000000"),
                // tuples and intervals element by element
                Arguments.of("(3, \\pi/2)", "\\left( 3, \\frac{\\pi}{2} \\right)"),
                Arguments.of("(0.5, 2)", "\\left(\\frac{1}{2}, 2\\right)"),
                Arguments.of("(\\frac{2}{4}, 1)", "(\\frac12,1)"),
                Arguments.of("\\left[ \\frac{\\pi}{8}, \\frac{5 \\pi}{4} \\right]", "[\\pi/8, 5\\pi/4]"),
                Arguments.of("(-\\infty, 1+\\sqrt{2}) \\cup (3, \\infty)", "(-\\infty, \\sqrt{2}+1) \\cup (3, \\infty)"));
    }

    @ParameterizedTest
    @MethodSource("same")
    void rightAnswersInAnotherFormScore(String a, String b) {
        assertTrue(MathAnswers.equivalent(a, b), a + " vs " + b);
        assertTrue(MathAnswers.equivalent(b, a), "symmetric: " + b + " vs " + a);
        assertEquals(1.0, MathReward.episodeReward("So the answer is $\\boxed{" + a + "}$.", b));
    }

    // (answer, truth): a number answers a truth written as a formula, but a formula does not answer a
    // number: the solver left the computation undone
    static Stream<Arguments> numberForAFormula() {
        return Stream.of(
                Arguments.of("1024", "2^{10}"),
                Arguments.of("9", "3^2"),
                Arguments.of("120", "\\binom{10}{3}"),
                Arguments.of("120", "5!"),
                Arguments.of("2", "\\sqrt{4}"),
                Arguments.of("5", "2+3"),
                Arguments.of("6", "2*3"),
                Arguments.of("1/6", "1/2/3"),
                Arguments.of("391", "17 \\times 23"));
    }

    @ParameterizedTest
    @MethodSource("numberForAFormula")
    void aNumberAnswersAFormulaButAFormulaDoesNotAnswerANumber(String number, String formula) {
        assertTrue(MathAnswers.equivalent(number, formula), number + " for " + formula);
        assertFalse(MathAnswers.equivalent(formula, number), formula + " for " + number);
    }

    static Stream<Arguments> different() {
        return Stream.of(
                // signs, terms, exponents
                Arguments.of("3 - 13x", "13x - 3"),
                Arguments.of("3 - 13x", "3 + 13x"),
                Arguments.of("p - q", "q - p"),
                Arguments.of("x^2+2x", "x^2+2x+1"),
                Arguments.of("(x+1)^2", "x^2+1"),
                Arguments.of("x+y", "x+z"),
                Arguments.of("2k+2", "2k+1"),
                Arguments.of("\\frac{\\sqrt{3}}{3}", "\\sqrt{3}"),
                Arguments.of("\\sqrt{2}", "\\sqrt[3]{2}"),
                Arguments.of("\\sqrt{2}/2", "\\sqrt{2}/3"),
                Arguments.of("\\cot x", "\\tan x"),
                Arguments.of("\\log x", "\\ln x"),
                Arguments.of("2\\pi", "2\\pi^2"),
                Arguments.of("1 \\pm \\sqrt{2}", "1 + \\sqrt{2}"),
                Arguments.of("\\pm\\sqrt{2}", "\\sqrt{2}"),
                // exact numbers stay exact: a decimal approximates nothing
                Arguments.of("0.33", "\\frac{1}{3}"),
                Arguments.of("0.33x", "\\frac{x}{3}"),
                Arguments.of("0.333333333333 \\cdot 1", "\\frac{1}{3}"),
                Arguments.of("0.7071", "\\frac{\\sqrt{2}}{2}"),
                Arguments.of("0.7071067811865476", "\\frac{\\sqrt{2}}{2}"),
                Arguments.of("3.141592653589793", "\\pi"),
                Arguments.of("1.4142135623730951", "\\sqrt2"),
                Arguments.of("2^{10}", "1000"),
                Arguments.of("1.2 \\times 10^6", "120000"),
                Arguments.of("2 3", "6"),
                // tuples and intervals: brackets, order, length
                Arguments.of("(1,2)", "[1,2)"),
                Arguments.of("(1,2)", "(2,1)"),
                Arguments.of("(1,2,3)", "(1,2)"),
                Arguments.of("(3, \\pi/2)", "(3, \\pi/3)"),
                Arguments.of("(1,234)", "1234"),
                Arguments.of("1,000", "1, 0"),
                Arguments.of("11, 111, 111, 100", "11111111100"),
                // lists: a second answer is not the answer
                Arguments.of("5\\text{ or }6", "5"),
                Arguments.of("3 \\text{ and } 4", "3"),
                Arguments.of("1 \\text{ and } 2", "1, 3"),
                Arguments.of("1, 1", "1, 2"),
                Arguments.of("1, 2, 3", "1, 2"),
                Arguments.of("\\pm 2", "2"),
                Arguments.of("2, -2", "\\pm 3"),
                Arguments.of("1 \\pm \\sqrt{2}", "1 - \\sqrt{2}"),
                Arguments.of("\\{\\pm 2\\}", "2"),
                Arguments.of("\\{\\pm 2\\}", "\\{2\\}"),
                Arguments.of("\\{\\pm 2\\}", "(2, -2)"),
                Arguments.of("\\frac{1 \\pm \\sqrt{5}}{2}", "\\frac{1+\\sqrt{5}}{2}"),
                Arguments.of("\\frac{1 \\pm \\sqrt{5}}{2}", "\\frac{1+\\sqrt5}{2}, \\frac{1+\\sqrt5}{2}"),
                Arguments.of("\\frac{1 \\pm \\sqrt{5}}{2}", "\\frac{1+\\sqrt5}{2}, \\frac{-1-\\sqrt5}{2}"),
                // two signs may mean two values or four: as written only
                Arguments.of("\\pm 1 \\pm i", "1+i, -1-i"),
                Arguments.of("\\pm 1 \\pm i", "1+i, 1-i, -1+i, -1-i"),
                Arguments.of("\\pm", "\\mp"),
                Arguments.of("[1, 2]", "[2, 1]"),
                Arguments.of("\\{1, 2\\}", "(1, 2)"),
                Arguments.of("(3,4), (1,2)", "(4,3), (1,2)"),
                // matrices: shape, entries, and a determinant is not a matrix
                Arguments.of("\\begin{pmatrix} 1 & 2 \\end{pmatrix}", "\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}"),
                Arguments.of("\\begin{pmatrix} 1/3 \\\\ 2/3 \\end{pmatrix}", "\\begin{pmatrix} 0.33 \\\\ 2/3 \\end{pmatrix}"),
                Arguments.of("\\begin{vmatrix} 1 \\\\ 2 \\end{vmatrix}", "\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}"),
                Arguments.of("(1, 2)", "\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}"),
                // one letter keeps its case: e is a constant or a variable, E a choice
                Arguments.of("e", "E"),
                Arguments.of("\\text{(C)}", "c"),
                Arguments.of("\\text{(C)}", "D"),
                Arguments.of("\\text{(C)}", "(C), (D)"),
                // words are text, not products of letters
                Arguments.of("\\text{even}", "\\text{neve}"),
                Arguments.of("\\text{East}", "\\text{West}"),
                // without \text, letters that prose does not spell keep their case: AB is a segment or A times B
                Arguments.of("YES", "yes"),
                Arguments.of("x y", "X Y"),
                Arguments.of("ab", "Ab c"),
                // a mixed number is no product, and units are words after a number
                Arguments.of("2\\frac{1}{4}", "\\frac{1}{2}"),
                Arguments.of("2 1/4", "21/4"),
                Arguments.of("5\\mathrm{e}", "5"),
                Arguments.of("x\\text{cm}", "x"),
                Arguments.of("2 m", "2"),
                // "in" is inches only as a word after a number: not 5in (a product), not \in
                Arguments.of("5in", "5"),
                Arguments.of("5 \\in", "5"),
                Arguments.of("52_8", "52"),
                Arguments.of("52_{8}", "52_9"),
                // undefined values are no evidence, and neither are doubles that under- or overflow
                Arguments.of("x^{6000}", "x^{6001}"),
                Arguments.of("(x/3)^{6000}", "(x/3)^{6001}"),
                Arguments.of("(3x)^{6000}", "(3x)^{6001}"),
                Arguments.of("x^{40}".repeat(150), "x^{6001}"),
                Arguments.of("\\frac{1}{0}", "\\frac{2}{0}"),
                Arguments.of("\\sqrt{-1}", "\\sqrt{-4}"));
    }

    @ParameterizedTest
    @MethodSource("different")
    void nearMissesStayWrong(String a, String b) {
        assertFalse(MathAnswers.equivalent(a, b), a + " vs " + b);
        assertFalse(MathAnswers.equivalent(b, a), "symmetric: " + b + " vs " + a);
    }

    @Test
    void whatAFuzzOfTheCheckerFound() {
        // five variables: the points' values were linear in the variable's index, so v1 + v4 = v2 + v3 at every
        // point and sign errors passed
        for (String[] p : new String[][] {{"a-b+c+d-e", "a+b-c-d+e"}, {"x_1+x_2-x_3-x_4+x_5", "x_1-x_2+x_3+x_4-x_5"},
                {"(a+b+e)^2+c+d", "(a+c+d)^2+b+e"}, {"a+b+c+d+e+f+g-h", "a+b+c+d+e+f-g+h"}}) {
            assertFalse(MathAnswers.equivalent(p[0], p[1]), p[0] + " vs " + p[1]);
        }
        assertTrue(MathAnswers.equivalent("e+d+c+b+a", "a+b+c+d+e"));
        assertTrue(MathAnswers.equivalent("\\sqrt{2}\\cdot 10^{10}", "10^{10}\\sqrt{2}"));
        // forms defined only above 1 need points there (the first mixed points had one of six above 1 for a
        // variable), and a cancellation's rounding (~1e-10 relative) is no difference (a 1e-12 tolerance refused it)
        for (String[] p : new String[][] {{"\\sqrt{x-1}\\sqrt{x+1}", "\\sqrt{x^2-1}"}, {"\\ln(x-1)+\\ln(x+1)", "\\ln(x^2-1)"},
                {"\\frac{\\sqrt{x-1}}{\\sqrt{x}}", "\\sqrt{1-\\frac1x}"}, {"\\ln(2x-3)", "\\ln(x-\\frac32)+\\ln 2"},
                {"\\sqrt{x-1}\\sqrt{y-1}", "\\sqrt{(x-1)(y-1)}"}, {"(2-\\sqrt{3})^{5}", "362-209\\sqrt{3}"},
                {"(1-\\sqrt{2})^{7}", "239-169\\sqrt{2}"}, {"\\frac{1}{362+209\\sqrt{3}}", "362-209\\sqrt{3}"}}) {
            assertTrue(MathAnswers.equivalent(p[0], p[1]), p[0] + " vs " + p[1]);
            assertTrue(MathAnswers.equivalent(p[1], p[0]), p[1] + " vs " + p[0]);
        }
        // an unbraced exponent of several digits is the whole run: 2^10 was read 2^1 times 0, and 0 scored for it
        assertFalse(MathAnswers.equivalent("0", "2^10"));
        assertFalse(MathAnswers.equivalent("0", "3 \\times 10^10"));
        assertTrue(MathAnswers.equivalent("1024", "2^10"));
        assertTrue(MathAnswers.equivalent("1.5 \\times 10^10", "15000000000"));
        // a number is compared as the reader read it: 1e1 is 10, not 1 times e times 1
        assertFalse(MathAnswers.equivalent("1e1", "e"));
        assertFalse(MathAnswers.equivalent("3e1", "3e"));
        // sets by a perfect matching, whatever the order (a greedy match took the partner another element needed)
        assertTrue(MathAnswers.equivalent("1024, 2^{10}", "2^{10}, 1024"));
        assertTrue(MathAnswers.equivalent("2^{10}, 1024", "1024, 2^{10}"));
        // numbers beyond any answer's size are not numbers (nested \frac of 1e9999 built millions of digits)
        assertTrue(MathAnswers.value("1e9999").isEmpty());
        assertTrue(MathAnswers.value("1e999").isPresent());
        String p = "1e9999";
        for (int d = 0; d < 9; d++) p = "\\frac{" + p + "}{\\frac{1}{" + p + "}}";
        assertFalse(MathAnswers.equivalent(p, "1"));
    }

    @Test
    void deepOrLongFormulasAreNotUnderstoodAndDoNotOverflow() {
        int deep = 100_000;
        assertFalse(MathAnswers.equivalent("-".repeat(deep) + "x", "x"));
        assertFalse(MathAnswers.equivalent("x^" + "-".repeat(deep) + "1", "1/x"));
        assertFalse(MathAnswers.equivalent("(".repeat(deep) + "x" + ")".repeat(deep), "x"));
        assertFalse(MathAnswers.equivalent("\\sqrt{".repeat(deep) + "x" + "}".repeat(deep), "x"));
        assertFalse(MathAnswers.equivalent("x+".repeat(deep) + "x", "x"));
        assertFalse(MathAnswers.equivalent("5" + " cm".repeat(deep), "5"));
        assertFalse(MathAnswers.equivalent("1, ".repeat(deep) + "2", "(1, 2)"));
        assertFalse(MathAnswers.equivalent("\\text{" + "ab ".repeat(deep) + "ab}", "\\text{AB}"));
        // as deep as answers have still reads
        assertTrue(MathAnswers.equivalent("(".repeat(20) + "x+1" + ")".repeat(20), "1+x"));
    }

    @Test
    void theToleranceOfInexactValues() {
        // a large irrational value is compared relative to its size: (1+\sqrt2)^{20} computed by powers and
        // written out differ by rounding in the last bits; one \sqrt{2} more is a different answer
        assertTrue(MathAnswers.equivalent("(1+\\sqrt{2})^{20}", "22619537+15994428\\sqrt{2}"));
        assertTrue(MathAnswers.equivalent("22619537+15994428\\sqrt{2}", "(1+\\sqrt{2})^{20}"));
        assertFalse(MathAnswers.equivalent("(1+\\sqrt{2})^{20}", "22619537+15994429\\sqrt{2}"));
        // against an exact zero the rounding of a cancellation (\sqrt{2}^2 - 2 is 4e-16) is no difference, on
        // either side; against any other exact value there is no absolute slack
        assertTrue(MathAnswers.equivalent("0", "\\sqrt{2}^2-2"));
        assertTrue(Expressions.equal("0", "\\sqrt{2}^2-2"));
        assertTrue(Expressions.equal("\\sqrt{2}^2-2", "0"));
        assertFalse(Expressions.equal("\\sqrt{2}^2-2", "10^{-15}"));
        assertFalse(Expressions.equal("10^{-15}", "\\sqrt{2}^2-2"));
    }

    @Test
    void rootsAndPowersWithoutARealValue() {
        // an even root of a negative number has no real value: no answer equals it
        assertFalse(MathAnswers.equivalent("-2", "\\sqrt{-4}"));
        assertFalse(MathAnswers.equivalent("-\\sqrt{4}", "\\sqrt{-4}"));
        assertFalse(MathAnswers.equivalent("-2", "\\sqrt[4]{-16}"));
        // an odd one has
        assertTrue(MathAnswers.equivalent("-2", "\\sqrt[3]{-8}"));
        assertTrue(MathAnswers.equivalent("-\\sqrt[3]{2}", "\\sqrt[3]{-2}"));
        // zero to a negative power is undefined, exact or not; a negative irrational power of another number is not
        assertFalse(MathAnswers.equivalent("0^{-1}", "0^{-2}"));
        assertFalse(MathAnswers.equivalent("0^{-\\sqrt{2}}", "0^{-\\sqrt{3}}"));
        assertTrue(MathAnswers.equivalent("2^{-\\sqrt{2}}", "\\frac{1}{2^{\\sqrt{2}}}"));
        assertTrue(MathAnswers.equivalent("x^{-\\sqrt{2}}", "\\frac{1}{x^{\\sqrt{2}}}"));
    }

    @Test
    void wordsCompareAsTextOnlyWhereOneSideWrapsThemInText() {
        // without \text two letters are a product: ab is ba, not AB
        assertTrue(MathAnswers.equivalent("ab", "ba"));
        assertFalse(MathAnswers.equivalent("ab", "AB"));
        // with it, words of two letters or more compare as text without case or spaces, on either side
        assertTrue(MathAnswers.equivalent("\\text{No}", "no"));
        assertTrue(MathAnswers.equivalent("no", "\\text{No}"));
        assertTrue(MathAnswers.equivalent("\\text{New York}", "new york"));
        assertTrue(MathAnswers.equivalent("\\text{New York}", "newyork"));
        assertFalse(MathAnswers.equivalent("\\text{ab}", "ba"));
        // one letter stays case-sensitive (e is a constant, E a choice); a formula in \text is still a formula
        assertFalse(MathAnswers.equivalent("\\text{A}", "a"));
        assertTrue(MathAnswers.equivalent("\\text{a+b}", "b+a"));
        assertTrue(MathAnswers.equivalent("\\text{2a}", "a+a"));
    }

    @Test
    void bareWordsCompareWithoutCaseWhereBothAreSpelledAsProse() {
        // prose: upper-case at most the first letter of each word, and each a short word or of three letters or
        // more with a vowel after the first
        assertTrue(MathAnswers.equivalent("No", "no"));
        assertTrue(MathAnswers.equivalent("None", "none"));
        assertTrue(MathAnswers.equivalent("Odd", "odd"));
        assertTrue(MathAnswers.equivalent("New York", "New york"));
        assertFalse(MathAnswers.equivalent("Yes", "No"));
        // letters of a formula otherwise: case counts, and two letters are still a product
        assertFalse(MathAnswers.equivalent("NO", "no"));
        assertFalse(MathAnswers.equivalent("AB", "ab"));
        assertFalse(MathAnswers.equivalent("aB", "ab"));
        assertFalse(MathAnswers.equivalent("x", "X"));
        // products of letters that a capital would have made prose: Xy, Ab, Abc, Xyz, Mn are not xy, ab, abc, xyz, mn
        for (String p : List.of("Xy", "Ab", "Abc", "Xyz", "Mn", "Pq", "Ab c")) {
            assertFalse(MathAnswers.equivalent(p, p.toLowerCase(java.util.Locale.ROOT)), p);
        }
        assertTrue(MathAnswers.equivalent("ab", "ba"));
        assertTrue(MathAnswers.equivalent("xy", "y x"));
    }

    @Test
    void longRepliesAreCleanedAsShortOnes() {
        // delimiters, periods and wrappers fifty thousand deep (cleaned in one pass now, where each layer
        // was a copy of the reply) still come off, and unclosed ones still stay
        int deep = 50_000;
        assertTrue(MathAnswers.equivalent("$".repeat(deep) + "5" + "$".repeat(deep), "5"));
        assertTrue(MathAnswers.equivalent("\\(".repeat(deep) + "5" + "\\)".repeat(deep), "5"));
        assertTrue(MathAnswers.equivalent("5" + ".".repeat(deep), "5"));
        assertTrue(MathAnswers.equivalent("$".repeat(deep) + "5" + "$.".repeat(deep), "5"));
        assertTrue(MathAnswers.equivalent("\\text{".repeat(deep) + "5" + "}".repeat(deep), "5"));
        assertTrue(MathAnswers.equivalent("\\boxed{\\textbf{".repeat(deep) + "5" + "}}".repeat(deep), "5"));
        assertFalse(MathAnswers.equivalent("\\text{".repeat(deep) + "5", "5"));
        assertEquals("\\text{\\text{5", MathAnswers.normalize("\\text{\\text{\\mathrm{\\text{5}}"));
        assertEquals("\\textstyle{5}", MathAnswers.normalize("\\text{\\textstyle{5}}"));
        assertEquals("xy\\text{", MathAnswers.normalize("\\text {x} \\textbf{\\mbox{y}} \\text{"));
        // a hundred thousand digits are no number (beyond any answer's size), nor are their groups
        assertFalse(MathAnswers.equivalent("9".repeat(2 * deep), "5"));
        assertTrue(MathAnswers.value("1" + " 000".repeat(deep)).isEmpty());
        assertEquals(MathAnswers.value("1" + "0".repeat(900)), MathAnswers.value("1" + " 000".repeat(300)));
    }

    // A formula of exactly `length` characters worth `value` (a variable or a digit): value+0+0...
    private static String padded(String value, int length) {
        int rest = length - value.length();
        return rest % 2 == 0 ? value + "+0".repeat(rest / 2) : value + "+0".repeat(rest / 2 - 1) + "+00";
    }

    @Test
    void setsAreUnorderedUpToTwelveElementsAndTwoThousandCharacters() {
        List<String> twelve = new ArrayList<>(), thirteen = new ArrayList<>();
        for (int i = 1; i <= 13; i++) {
            if (i <= 12) twelve.add(Integer.toString(i));
            thirteen.add(Integer.toString(i));
        }
        String t12 = String.join(", ", twelve), t13 = String.join(", ", thirteen);
        assertTrue(MathAnswers.equivalent(String.join(", ", twelve.reversed()), t12));
        // larger sets are compared in order
        assertFalse(MathAnswers.equivalent(String.join(", ", thirteen.reversed()), t13));
        assertTrue(MathAnswers.equivalent(t13, t13.replace(" ", "")));
        // the elements' characters together (after the separators go), on either side
        for (int total : new int[] {2000, 2001}) {
            List<String> longForms = List.of(padded("x", 700), padded("y", 700), padded("z", total - 1401), "w");
            assertEquals(total, longForms.stream().mapToInt(String::length).sum());
            String longSet = String.join(", ", longForms);
            assertEquals(total == 2000, MathAnswers.equivalent(longSet, "w, z, y, x"), "predicted " + total);
            assertEquals(total == 2000, MathAnswers.equivalent("w, z, y, x", longSet), "truth " + total);
            assertTrue(MathAnswers.equivalent("x, y, z, w", longSet), "in order " + total);
        }
    }
}
