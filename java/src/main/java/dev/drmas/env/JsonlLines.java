// JsonlLines.java — the reading of a JSONL data file that the task and corpus readers share: UTF-8
// lines in file order (a byte order mark skipped), blank ones skipped, each handed on with its
// "file:line" for error messages, and the file's own problems (missing, not UTF-8, unreadable) as
// TaskFileExceptions naming it.
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
                // a byte order mark (Notepad, PowerShell) is no text of the first line
                if (lineNo == 1 && line.startsWith("\uFEFF")) line = line.substring(1);
                if (!line.isBlank()) sink.accept(line, lineNo, name + ":" + lineNo);
            }
        } catch (NoSuchFileException e) {
            throw new TaskFileException(name + ": no such file");
        } catch (CharacterCodingException e) {
            // the reader decodes ahead of the lines it hands out: find the first bad byte's line in the file itself
            long[] bad = firstBadByte(file);
            throw new TaskFileException(bad == null ? name + ": not UTF-8 text"
                    : name + ":" + bad[0] + String.format(": not UTF-8 text (byte 0x%02x)", bad[1]), e);
        } catch (IOException e) {
            throw new TaskFileException(name + ": cannot read: " + e.getMessage(), e);
        }
    }

    /**
     * The line (1-based) and the value of the first byte of {@code file} that is not UTF-8, or null when
     * there is none (the file changed since). Streamed: a corpus is gigabytes.
     */
    static long[] firstBadByte(Path file) {
        var decoder = StandardCharsets.UTF_8.newDecoder();  // (reports malformed input: the default)
        java.nio.ByteBuffer in = java.nio.ByteBuffer.allocate(1 << 16);
        java.nio.CharBuffer out = java.nio.CharBuffer.allocate(1 << 16);
        long line = 1;
        try (java.nio.channels.ReadableByteChannel ch = Files.newByteChannel(file)) {
            boolean eof = false;
            while (true) {
                if (!eof && ch.read(in) < 0) eof = true;
                in.flip();
                java.nio.charset.CoderResult r = decoder.decode(in, out, eof);
                out.flip();
                for (int i = 0; i < out.limit(); i++) if (out.get(i) == '\n') line++;
                out.clear();
                if (r.isError()) return new long[] {line, in.get(in.position()) & 0xff};
                in.compact();
                if (eof && in.position() == 0) return null;
            }
        } catch (IOException e) {
            return null;
        }
    }
}
