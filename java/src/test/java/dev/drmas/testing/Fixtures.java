// Fixtures.java — where tests find the data that cannot be downloaded here (the real Qwen3
// tokenizer in ../shared/fixtures next to the checkout). Tests that need a fixture skip, with a
// message naming the folder, when it is absent (e.g. on a clone without the shared folder).
package dev.drmas.testing;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Optional;
import org.junit.jupiter.api.Assumptions;

public final class Fixtures {
    private Fixtures() {
    }

    /**
     * The fixture folder {@code name} (e.g. "qwen3-tokenizer"): {@code $DRMAS_FIXTURES/name} if that
     * variable is set, else {@code shared/fixtures/name} in the working directory or any parent of
     * it (the checkout sits beside {@code shared/}, and surefire runs in the module folder).
     */
    public static Optional<Path> find(String name) {
        String env = System.getenv("DRMAS_FIXTURES");
        if (env != null && !env.isBlank()) {
            Path p = Path.of(env, name);
            return Files.isDirectory(p) ? Optional.of(p) : Optional.empty();
        }
        for (Path dir = Path.of("").toAbsolutePath(); dir != null; dir = dir.getParent()) {
            Path p = dir.resolve("shared").resolve("fixtures").resolve(name);
            if (Files.isDirectory(p)) {
                return Optional.of(p);
            }
        }
        return Optional.empty();
    }

    /** The fixture folder, or a JUnit assumption failure (test skipped) saying what is missing. */
    public static Path require(String name) {
        Optional<Path> p = find(name);
        Assumptions.assumeTrue(p.isPresent(), () -> "fixture '" + name + "' not found (looked in $DRMAS_FIXTURES and "
                + "shared/fixtures above " + Path.of("").toAbsolutePath() + "); test skipped");
        return p.get();
    }

    /** The real Qwen3 tokenizer (tokenizer.json, tokenizer_config.json). */
    public static Path qwen3Tokenizer() {
        return require("qwen3-tokenizer");
    }
}
