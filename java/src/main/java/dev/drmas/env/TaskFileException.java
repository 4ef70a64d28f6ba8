// TaskFileException.java — a task file that drmas cannot use: missing, unreadable, empty or with a
// malformed line. The message names the file, the line and the field, so that the CLI can show it
// as it is.
package dev.drmas.env;

public final class TaskFileException extends RuntimeException {
    public TaskFileException(String message) {
        super(message);
    }

    public TaskFileException(String message, Throwable cause) {
        super(message, cause);
    }
}
