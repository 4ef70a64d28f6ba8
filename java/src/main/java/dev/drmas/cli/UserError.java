// UserError.java — an error in what the user gave (a file, a flag): reported as one line and
// exit status 1 (or the status it carries: 75 for an experiment a job of which stopped until a service
// is back), without a stack trace.
package dev.drmas.cli;

final class UserError extends RuntimeException {
    final int status;

    UserError(String message) {
        this(message, null, 1);
    }

    UserError(String message, Throwable cause) {
        this(message, cause, 1);
    }

    UserError(String message, Throwable cause, int status) {
        super(message, cause);
        this.status = status;
    }
}
