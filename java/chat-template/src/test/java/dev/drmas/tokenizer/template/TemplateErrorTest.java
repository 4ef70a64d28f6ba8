// TemplateErrorTest.java — bad templates and failing renders: each error must say what went wrong
// and where (line:col of the offending token), and raise_exception must surface the template's
// own message unchanged. Positions below are counted by hand on the templates shown.
package dev.drmas.tokenizer.template;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class TemplateErrorTest {
    private static TemplateException parseError(String source) {
        return assertThrows(TemplateException.class, () -> Template.parse(source));
    }

    private static TemplateException renderError(String source, Map<String, Object> context) {
        Template t = Template.parse(source);
        return assertThrows(TemplateException.class, () -> t.render(context));
    }

    private static void assertAt(TemplateException e, int line, int column, String phrase) {
        assertEquals(line + ":" + column, e.line() + ":" + e.column(), e.getMessage());
        assertTrue(e.reason().contains(phrase), "'" + e.reason() + "' lacks '" + phrase + "'");
        assertTrue(e.getMessage().contains("line " + line + ":" + column), e.getMessage());
    }

    @Test
    void missingExpressionPointsAtTheTagEnd() {
        assertAt(parseError("line one\n{% if x %}\n  {{ 1 + }}\n{% endif %}"), 3, 10, "end of print statement");
    }

    @Test
    void unclosedBlockNamesWhereItWasOpened() {
        TemplateException e = parseError("a\n  {% for m in messages %}\n{{ m }}\n");
        assertTrue(e.reason().contains("'for' block opened at line 2:6"), e.reason());
        assertTrue(e.reason().contains("'endfor'"), e.reason());
    }

    @Test
    void strayEndTagNamesTheEnclosingBlock() {
        TemplateException e = parseError("{% for x in y %}\n{% endif %}\n{% endfor %}");
        assertAt(e, 2, 4, "unexpected tag 'endif' inside the 'for' block opened at line 1:4");
    }

    @Test
    void unknownFilterAndTestAreParseErrors() {
        assertAt(parseError("{{ x\n   | trim | nosuchfilter }}"), 2, 13, "no filter named 'nosuchfilter'");
        assertAt(parseError("{% if x is nosuchtest %}{% endif %}"), 1, 12, "no test named 'nosuchtest'");
    }

    @Test
    void lexicalErrors() {
        assertAt(parseError("ok\n{{ 'unterminated }}"), 2, 4, "unterminated string");
        assertAt(parseError("{{ x "), 1, 1, "unexpected end of template, expected '}}'");
        assertAt(parseError("{# never closed"), 1, 1, "missing end of comment tag");
        assertAt(parseError("{{ (1 ] }}"), 1, 7, "unexpected ']', expected ')'");
        assertAt(parseError("{{ a ! b }}"), 1, 6, "unexpected char '!'");
    }

    @Test
    void statementErrors() {
        assertAt(parseError("{% break %}"), 1, 4, "'break' outside of a for loop");
        assertAt(parseError("{% include 'x' %}"), 1, 4, "not supported");
        assertAt(parseError("{% set true = 1 %}"), 1, 8, "can't assign to 'true'");
        assertAt(parseError("{% macro m(a=1, b) %}{% endmacro %}"), 1, 17, "non-default argument follows default argument");
    }

    @Test
    void raiseExceptionSurfacesTheTemplatesMessage() {
        String src = "{% for m in messages %}\n{% if m.role not in ['user', 'assistant'] %}\n"
                + "  {{ raise_exception('Unknown role: ' ~ m.role) }}\n{% endif %}{% endfor %}";
        TemplateException e = assertThrows(TemplateException.class, () -> ChatTemplate.parse(src)
                .render(List.of(Map.of("role", "user", "content", "x"), Map.of("role", "robot", "content", "y")), false, null));
        assertTrue(e.raisedByTemplate());
        assertEquals("Unknown role: robot", e.reason());
        assertEquals("3:6", e.line() + ":" + e.column()); // at raise_exception
        assertTrue(e.getMessage().contains("Unknown role: robot"), e.getMessage());
    }

    @Test
    void runtimeErrorsPointAtTheFailingNode() {
        TemplateException e = renderError("{{ messages[0].content }}\n{{ messages[0].content.upper().foo() }}",
                Map.of("messages", List.of(Map.of("content", "x"))));
        assertAt(e, 2, 32, "'str object' has no attribute 'foo'"); // at foo
        assertFalse(e.raisedByTemplate());
        assertAt(renderError("{{ 1 +\n 'a' }}", Map.of()), 1, 6, "unsupported operand type(s) for +: 'int' and 'str'");
        assertAt(renderError("{% set x = u.attr %}", Map.of()), 1, 14, "'u' is undefined"); // at .attr
        assertAt(renderError("{% for a, b in [1] %}{% endfor %}", Map.of()), 1, 4, "cannot unpack non-iterable int object");
        assertAt(renderError("{{ 'abc'.split(1) }}", Map.of()), 1, 10, "must be str"); // at split
        assertAt(renderError("{{ [1] | tojson(nope=1) }}", Map.of()), 1, 10, "unexpected keyword argument 'nope'");
    }

    @Test
    void contextValuesWithoutPythonMeaningAreRejectedWithTheirPath() {
        Map<String, Object> message = Map.of("role", "user", "content", new StringBuilder("hi"));
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> ChatTemplate.parse("{{ messages }}").render(List.of(message), false, null));
        assertTrue(e.getMessage().contains("messages[0]['content'] is a java.lang.StringBuilder"), e.getMessage());
    }
}
