// UserError.java — an error in what the user gave (a file, a flag): reported as one line and
// exit status 1, without a stack trace.
package dev.drmas.cli;

final class UserError extends RuntimeException {
    UserError(String message) {
        super(message);
    }

    UserError(String message, Throwable cause) {
        super(message, cause);
    }
}
