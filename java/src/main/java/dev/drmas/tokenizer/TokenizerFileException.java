// TokenizerFileException.java — a tokenizer folder that cannot be used: missing, unreadable or
// malformed files. The message names the file and what is wrong with it, so that the CLI can show it
// as it is.
package dev.drmas.tokenizer;

public final class TokenizerFileException extends RuntimeException {
    public TokenizerFileException(String message) {
        super(message);
    }

    public TokenizerFileException(String message, Throwable cause) {
        super(message, cause);
    }
}
