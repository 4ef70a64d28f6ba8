// FeatureGoldenTest.java — every language feature case of features-goldens.json (whitespace
// control, loops, scoping, macros, filters, tests, Python printing, errors) and the seeded random
// templates of fuzz-goldens.json, rendered here and compared byte for byte with what jinja2
// rendered under HF's settings.
package dev.drmas.tokenizer.template;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Clock;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

class FeatureGoldenTest {
    @TestFactory
    Stream<DynamicTest> featuresMatchJinja2() {
        return cases("features-goldens.json", 100, true);
    }

    @TestFactory
    Stream<DynamicTest> randomTemplatesMatchJinja2() {
        return cases("fuzz-goldens.json", 250, false);
    }

    /** errorPhrase: error cases name a phrase both jinja2's and our message contain; else any failure will do. */
    private static Stream<DynamicTest> cases(String file, int atLeast, boolean errorPhrase) {
        Map<String, Object> golden = Goldens.load(file);
        Clock clock = Goldens.clock(golden);
        List<Map<String, Object>> cases = Goldens.cases(golden);
        assertTrue(cases.size() >= atLeast, file + " has only " + cases.size() + " cases");
        return cases.stream().map(c -> DynamicTest.dynamicTest((String) c.get("name"), () -> {
            String source = (String) c.get("source");
            @SuppressWarnings("unchecked")
            Map<String, Object> context = (Map<String, Object>) c.get("context");
            if (c.containsKey("error")) {
                TemplateException e = assertThrows(TemplateException.class,
                        () -> Template.parse(source).render(context, clock));
                if (errorPhrase) {
                    assertTrue(e.reason().contains((String) c.get("error")),
                            "message '" + e.getMessage() + "' lacks jinja2's phrase '" + c.get("error") + "'");
                }
                assertTrue(e.getMessage().contains("line " + e.line() + ":" + e.column()), e.getMessage());
            } else {
                String expected = (String) c.get("expected");
                String actual = Template.parse(source).render(context, clock);
                assertEquals(expected, actual, () -> Goldens.diff(expected, actual));
            }
        }));
    }
}
