// Errors.java — an exception as the one line a user reads: its message and those of its causes (what
// was being done, then why), with java.nio's bare texts ("java.nio.file.NoSuchFileException: /x")
// turned into "path: reason", each part once. Main prints it; DRMAS_DEBUG=1 or --verbose adds
// the stack trace.
package dev.drmas.cli;

import java.io.IOException;
import java.nio.charset.CharacterCodingException;
import java.nio.file.AccessDeniedException;
import java.nio.file.DirectoryNotEmptyException;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.FileSystemException;
import java.nio.file.NoSuchFileException;
import java.nio.file.NotDirectoryException;
import java.util.ArrayList;
import java.util.List;

final class Errors {
    private Errors() {
    }

    /** The message chain of {@code t}: "what: why: deeper why", without repeats. */
    static String describe(Throwable t) {
        List<String> parts = new ArrayList<>();
        String text = "";
        int depth = 0;
        for (Throwable x = t; x != null && depth < 10; x = x.getCause(), depth++) {
            String m = own(x);
            if (m == null || m.isBlank() || text.contains(m)) continue;
            parts.add(m);
            text = String.join(": ", parts);
        }
        return parts.isEmpty() ? t.getClass().getName() : text;
    }

    /** What {@code t} itself says, or null when it only repeats its cause. */
    private static String own(Throwable t) {
        if (t instanceof FileSystemException f) return fileProblem(f);
        if (t instanceof OutOfMemoryError) return "out of memory (" + t.getMessage() + ")";
        String m = t.getMessage();
        Throwable c = t.getCause();
        // wrappers made from their cause alone (new UncheckedIOException(e), new RuntimeException(e)) add nothing
        if (m == null || c != null && m.equals(c.toString())) {
            return m == null && c == null ? t.getClass().getSimpleName() : null;
        }
        if (t instanceof CharacterCodingException) return "not valid text in the expected encoding (UTF-8)";
        return m;
    }

    /** Why an I/O operation failed, in words: "No space left on device", "permission denied". */
    static String reason(IOException e) {
        if (e instanceof FileSystemException f) return fileProblem(f);
        return e.getMessage() != null ? e.getMessage() : e.getClass().getSimpleName();
    }

    private static String fileProblem(FileSystemException f) {
        String what = f.getReason();
        if (what == null) {
            what = switch (f) {
                case NoSuchFileException x -> "no such file or folder";
                case AccessDeniedException x -> "permission denied";
                case FileAlreadyExistsException x -> "already exists";
                case NotDirectoryException x -> "not a folder";
                case DirectoryNotEmptyException x -> "folder not empty";
                default -> f.getClass().getSimpleName();
            };
        }
        StringBuilder b = new StringBuilder();
        if (f.getFile() != null) b.append(f.getFile());
        if (f.getOtherFile() != null) b.append(" -> ").append(f.getOtherFile());
        if (!b.isEmpty()) b.append(": ");
        return b.append(what).toString();
    }
}
