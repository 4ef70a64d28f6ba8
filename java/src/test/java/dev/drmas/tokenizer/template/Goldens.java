// Goldens.java — loads the golden files that make_goldens.py renders with jinja2 configured as HF
// transformers configures it, and the clock those goldens were rendered at.
package dev.drmas.tokenizer.template;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.time.Clock;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.util.List;
import java.util.Map;

final class Goldens {
    private Goldens() {}

    /** A golden file: its cases (maps as Jackson reads them: LinkedHashMap, ArrayList, Integer, Double, ...). */
    @SuppressWarnings("unchecked")
    static Map<String, Object> load(String name) {
        try (InputStream in = resource(name)) {
            return new ObjectMapper().readValue(in, Map.class);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    static String text(String name) {
        try (InputStream in = resource(name)) {
            return new String(in.readAllBytes(), StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private static InputStream resource(String name) {
        InputStream in = Goldens.class.getResourceAsStream("/chat-templates/" + name);
        if (in == null) throw new IllegalStateException("test resource chat-templates/" + name + " is missing");
        return in;
    }

    @SuppressWarnings("unchecked")
    static List<Map<String, Object>> cases(Map<String, Object> golden) {
        return (List<Map<String, Object>>) golden.get("cases");
    }

    /** strftime_now in the goldens reads this local time ("now" in the file); UTC here, same wall clock. */
    static Clock clock(Map<String, Object> golden) {
        LocalDateTime now = LocalDateTime.parse((String) golden.get("now"));
        return Clock.fixed(now.toInstant(ZoneOffset.UTC), ZoneOffset.UTC);
    }

    /** The first index where two strings differ, with context, for readable failures. */
    static String diff(String expected, String actual) {
        int i = 0;
        while (i < Math.min(expected.length(), actual.length()) && expected.charAt(i) == actual.charAt(i)) i++;
        int from = Math.max(0, i - 40);
        return "first difference at char " + i + ":\n  expected ..." + escape(expected.substring(from, Math.min(expected.length(), i + 40)))
                + "\n  actual   ..." + escape(actual.substring(from, Math.min(actual.length(), i + 40)));
    }

    private static String escape(String s) {
        return s.replace("\n", "\\n").replace("\t", "\\t");
    }
}
