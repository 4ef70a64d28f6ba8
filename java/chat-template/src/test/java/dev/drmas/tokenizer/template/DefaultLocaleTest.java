// DefaultLocaleTest.java — the feature goldens (strftime_now among them) render byte for byte under default
// locales whose digits or case rules are not Python's (Arabic-Indic and Persian digits, Turkish
// dotless ı): jinja2's filters, str methods and strftime do not follow the user's locale, so the
// interpreter must not either.
package dev.drmas.tokenizer.template;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.time.Clock;
import java.util.Locale;
import java.util.Map;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class DefaultLocaleTest {
    @ParameterizedTest
    @ValueSource(strings = {"ar-EG", "fa-IR", "tr-TR"})
    void goldensDoNotDependOnTheDefaultLocale(String tag) {
        Locale before = Locale.getDefault();
        try {
            Locale.setDefault(Locale.forLanguageTag(tag));
            Map<String, Object> golden = Goldens.load("features-goldens.json");
            Clock clock = Goldens.clock(golden);
            for (Map<String, Object> c : Goldens.cases(golden)) {
                if (c.containsKey("error")) continue;
                @SuppressWarnings("unchecked")
                Map<String, Object> context = (Map<String, Object>) c.get("context");
                String expected = (String) c.get("expected");
                String actual = Template.parse((String) c.get("source")).render(context, clock);
                assertEquals(expected, actual, () -> tag + ", case " + c.get("name") + ": " + Goldens.diff(expected, actual));
            }
        } finally {
            Locale.setDefault(before);
        }
    }
}
