// Goldens.java — loads the golden files that make_goldens.py renders with jinja2 configured as HF
// transformers configures it, the clock those goldens were rendered at, and the real Qwen3
// tokenizer_config.json from the shared fixtures (tests that need it skip, saying so, without it).
package dev.drmas.tokenizer.template;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Assumptions;

final class Goldens {
    private Goldens() {}

    /** A golden file: its cases (as JsonReader builds them: LinkedHashMap, ArrayList, Integer, Double, ...). */
    @SuppressWarnings("unchecked")
    static Map<String, Object> load(String name) {
        return (Map<String, Object>) JsonReader.parse(text(name), "chat-templates/" + name);
    }

    /**
     * The fixture's tokenizer_config.json: in $DRMAS_FIXTURES/qwen3-tokenizer if that variable is
     * set, else in shared/fixtures/qwen3-tokenizer in the working directory or a parent of it (the
     * checkout sits beside shared/; the trainer's dev.drmas.testing.Fixtures looks the same way,
     * which this module cannot depend on). Absent: a JUnit assumption failure, the test skipped.
     */
    @SuppressWarnings("unchecked")
    static Map<String, Object> qwen3TokenizerConfig() throws IOException {
        Path dir = qwen3Fixture();
        Assumptions.assumeTrue(dir != null, () -> "fixture 'qwen3-tokenizer' not found (looked in $DRMAS_FIXTURES and "
                + "shared/fixtures above " + Path.of("").toAbsolutePath() + "); test skipped");
        Path config = dir.resolve("tokenizer_config.json");
        return (Map<String, Object>) JsonReader.parse(Files.readString(config), config.toString());
    }

    private static Path qwen3Fixture() {
        String env = System.getenv("DRMAS_FIXTURES");
        if (env != null && !env.isBlank()) {
            Path p = Path.of(env, "qwen3-tokenizer");
            return Files.isDirectory(p) ? p : null;
        }
        for (Path dir = Path.of("").toAbsolutePath(); dir != null; dir = dir.getParent()) {
            Path p = dir.resolve("shared").resolve("fixtures").resolve("qwen3-tokenizer");
            if (Files.isDirectory(p)) return p;
        }
        return null;
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
