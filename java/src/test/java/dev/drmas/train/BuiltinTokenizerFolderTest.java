// BuiltinTokenizerFolderTest.java — a run's built-in tokenizer folder (runDir/tokenizer): written
// whole through a temporary folder; a folder with a file cut short or missing (a run killed while
// writing it, before the write went through a temporary folder) is written again instead of failing
// every later start; a whole folder is kept as it is, whatever the built-in tokenizer is now (the
// run's checkpoints were trained with it).
package dev.drmas.train;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.tokenizer.BuiltinTokenizer;
import dev.drmas.tokenizer.HfTokenizer;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class BuiltinTokenizerFolderTest {
    @TempDir
    Path tmp;

    static void assertLoads(Path dir) throws IOException {
        try (HfTokenizer t = HfTokenizer.load(dir)) {
            assertTrue(t.encode("1 + 2 = 3").length > 0, dir.toString());
        }
    }

    @Test
    void aFreshRunGetsTheWholeFolderAndNoTemporaryOne() throws IOException {
        Path run = tmp.resolve("runs/fresh");
        Path dir = Policies.builtinTokenizer(run);
        assertEquals(run.resolve("tokenizer"), dir);
        assertLoads(dir);
        assertFalse(Files.exists(run.resolve("tokenizer.tmp")));
        // the built-in tokenizer's own files, byte for byte
        Path ref = tmp.resolve("ref");
        BuiltinTokenizer.writeTo(ref);
        for (String f : new String[] {"tokenizer.json", "tokenizer_config.json"}) {
            assertArrayEquals(Files.readAllBytes(ref.resolve(f)), Files.readAllBytes(dir.resolve(f)), f);
        }
    }

    @Test
    void aFileCutShortOrMissingIsWrittenAgain() throws IOException {
        Path run = tmp.resolve("runs/killed");
        Path dir = Policies.builtinTokenizer(run);
        byte[] whole = Files.readAllBytes(dir.resolve("tokenizer.json"));
        // cut short by a kill: every later start read it and failed
        Files.write(dir.resolve("tokenizer.json"), Arrays.copyOf(whole, whole.length / 2));
        Files.writeString(run.resolve("tokenizer.tmp"), "a temporary file a kill left");  // and a leftover where the write goes
        assertLoads(Policies.builtinTokenizer(run));
        assertArrayEquals(whole, Files.readAllBytes(dir.resolve("tokenizer.json")));
        assertFalse(Files.exists(run.resolve("tokenizer.tmp")));
        // killed before its second file
        Files.delete(dir.resolve("tokenizer_config.json"));
        assertLoads(Policies.builtinTokenizer(run));
        // an empty file
        Files.write(dir.resolve("tokenizer_config.json"), new byte[0]);
        assertLoads(Policies.builtinTokenizer(run));
    }

    @Test
    void aWholeFolderIsKeptAsItIs() throws IOException {
        Path run = tmp.resolve("runs/kept");
        Path dir = Policies.builtinTokenizer(run);
        // a run of another version: its tokenizer_config.json differs, whole; the run keeps its own
        String config = Files.readString(dir.resolve("tokenizer_config.json"), StandardCharsets.UTF_8)
                .replace("\"clean_up_tokenization_spaces\"", "\"model_max_length\" : 4096,\n  \"clean_up_tokenization_spaces\"");
        assertTrue(config.contains("model_max_length"), config);
        Files.writeString(dir.resolve("tokenizer_config.json"), config, StandardCharsets.UTF_8);
        Policies.builtinTokenizer(run);
        assertEquals(config, Files.readString(dir.resolve("tokenizer_config.json"), StandardCharsets.UTF_8));
    }
}
