// ErrorsTest.java — an error's one line carries its causes (issue 20: Main printed only the outer
// message, so "writing …/config.yaml" came without why, and java.nio's bare "NoSuchFileException:
// /proc/x" without what): what was being done, then why, each part once; DRMAS_DEBUG/--verbose
// add the stack trace.
package dev.drmas.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.AccessDeniedException;
import java.nio.file.FileSystemException;
import java.nio.file.NoSuchFileException;
import org.junit.jupiter.api.Test;

class ErrorsTest {
    @Test
    void theChainIsPrintedWithPathsAndReasons() {
        assertEquals("writing /r/config.yaml: /r/config.yaml.tmp: permission denied",
                Errors.describe(new UncheckedIOException("writing /r/config.yaml", new AccessDeniedException("/r/config.yaml.tmp"))));
        assertEquals("/proc/x: no such file or folder", Errors.describe(new UncheckedIOException(new NoSuchFileException("/proc/x"))));
        assertEquals("/r/a: No space left on device",
                Errors.describe(new RuntimeException(new FileSystemException("/r/a", null, "No space left on device"))));
        // a cause already in the message is not repeated
        IOException io = new IOException("File too large");
        assertEquals("cannot write the checkpoint (in /r/t): File too large",
                Errors.describe(new IOException("cannot write the checkpoint (in /r/t): File too large", io)));
        assertEquals("NullPointerException", Errors.describe(new NullPointerException()));
    }

    @Test
    void verboseAddsTheStackTrace() {
        Cli.Run plain = Cli.run("tokenize", "--tokenizer", "/proc/no-such-tokenizer", "x");
        assertTrue(plain.exit() != 0);
        assertTrue(!plain.err().contains("\tat "), plain.err());
        Cli.Run verbose = Cli.run("tokenize", "--verbose", "--tokenizer", "/proc/no-such-tokenizer", "x");
        assertTrue(verbose.err().contains("no-such-tokenizer"), verbose.err());
        assertTrue(verbose.err().contains("\tat dev.drmas."), verbose.err());
    }
}
