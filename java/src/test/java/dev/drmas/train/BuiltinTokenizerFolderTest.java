// BuiltinTokenizerFolderTest.java — a run's built-in tokenizer folder (runDir/tokenizer): written
// whole through a temporary folder (a kill while writing it in place left files that every later
// start failed on); a folder without its tokenizer.json (such a kill, before it) is written whole; a
// file in its place is an error naming it, not removed; a folder that is there is kept as it is,
// whatever the built-in tokenizer is now (the run's checkpoints were trained with it).
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
    void aFolderWithoutItsTokenizerJsonIsWrittenWholeAndAFileInItsPlaceIsAnError() throws IOException {
        // a run of an earlier version killed while writing the folder in place: its config there, no tokenizer.json
        Path run = tmp.resolve("runs/killed"), dir = run.resolve("tokenizer");
        Files.createDirectories(dir);
        Files.writeString(dir.resolve("tokenizer_config.json"), "{\"bos_tok");
        Files.writeString(run.resolve("tokenizer.tmp"), "a temporary file a kill left");  // and a leftover where the write goes
        assertLoads(Policies.builtinTokenizer(run));
        assertFalse(Files.exists(run.resolve("tokenizer.tmp")));
        Path ref = tmp.resolve("ref");
        BuiltinTokenizer.writeTo(ref);
        assertArrayEquals(Files.readAllBytes(ref.resolve("tokenizer_config.json")), Files.readAllBytes(dir.resolve("tokenizer_config.json")));
        // a file where the folder goes is not removed: an error naming it
        Path other = tmp.resolve("runs/file");
        Files.createDirectories(other);
        Files.writeString(other.resolve("tokenizer"), "not a folder");
        var e = org.junit.jupiter.api.Assertions.assertThrows(java.io.UncheckedIOException.class, () -> Policies.builtinTokenizer(other));
        assertTrue(e.getMessage().contains(other.resolve("tokenizer").toString()), e.getMessage());
        assertEquals("not a folder", Files.readString(other.resolve("tokenizer")));
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
