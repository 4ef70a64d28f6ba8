// PromptTemplateTest.java — placeholder parsing next to LaTeX braces, escapes, the error for a
// missing value, and the default verdict parser.
package dev.drmas.agent;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class PromptTemplateTest {
    @Test
    void placeholdersAreIdentifiersAndOtherBracesStayLiteral() {
        PromptTemplate t = PromptTemplate.of("Q: {question} in \\boxed{} or \\frac{1}{2}; {{answer}} {answer}{ x }");
        assertEquals(List.of("question", "answer"), List.copyOf(t.placeholders()));
        assertEquals("Q: 1+1=? in \\boxed{} or \\frac{1}{2}; {answer} 2{ x }",
                t.render(Map.of("question", "1+1=?", "answer", "2")));
        // values are inserted verbatim, never re-parsed as templates
        assertEquals("Q: {answer} in \\boxed{} or \\frac{1}{2}; {answer} x{ x }",
                t.render(Map.of("question", "{answer}", "answer", "x")));
    }

    @Test
    void aMissingValueNamesThePlaceholder() {
        var ex = assertThrows(IllegalStateException.class, () -> PromptTemplate.of("A: {answer}").render(Map.of("question", "q")));
        assertTrue(ex.getMessage().contains("no value for {answer}"), ex.getMessage());
    }

    @Test
    void tagVerdictParserReadsTheLastTag() {
        VerdictParser p = VerdictParser.lastTag("approve", "reject");
        assertEquals(Verdict.APPROVE, p.parse("fine. <verify>approve</verify>"));
        assertEquals(Verdict.REJECT, p.parse("<verify> Reject </verify>"));
        assertEquals(Verdict.APPROVE, p.parse("<verify>reject</verify> wait, no: <verify>approve</verify>"));
        assertEquals(Verdict.MALFORMED, p.parse("<verify>maybe</verify>"));
        assertEquals(Verdict.MALFORMED, p.parse("approve"));
        assertEquals(Verdict.MALFORMED, p.parse(""));
    }
}
