// JsonlLines.java — the reading of a JSONL data file that the task and corpus readers share: UTF-8
// lines in file order, blank ones skipped, each handed on with its "file:line" for error messages,
// and the file's own problems (missing, not UTF-8, unreadable) as TaskFileExceptions naming it.
package dev.drmas.env;

import java.io.BufferedReader;
import java.io.IOException;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;

public final class JsonlLines {
    private JsonlLines() {
    }

    /** One non-blank line: its text, its 1-based number, and "file:line". */
    @FunctionalInterface
    public interface Sink {
        void accept(String line, int lineNo, String where);
    }

    /** Hands every non-blank line of {@code file} to {@code sink}, in file order. */
    public static void forEach(Path file, Sink sink) {
        String name = file.toString();
        try (BufferedReader in = Files.newBufferedReader(file, StandardCharsets.UTF_8)) {
            String line;
            int lineNo = 0;
            while ((line = in.readLine()) != null) {
                lineNo++;
                if (!line.isBlank()) sink.accept(line, lineNo, name + ":" + lineNo);
            }
        } catch (NoSuchFileException e) {
            throw new TaskFileException(name + ": no such file");
        } catch (CharacterCodingException e) {
            throw new TaskFileException(name + ": not UTF-8 text", e);
        } catch (IOException e) {
            throw new TaskFileException(name + ": cannot read: " + e.getMessage(), e);
        }
    }
}
