// DrmasException.java — a failed libdrmas call: the status code of drmas.h and the library's
// own message, which names the argument and, for bad data, the first offending index.
package dev.drmas.bindings;

public final class DrmasException extends RuntimeException {
    public static final int ERR_NULL = 1, ERR_SIZE = 2, ERR_RANGE = 3, ERR_NONFINITE = 4,
            ERR_CONFIG = 5, ERR_UNSUPPORTED = 6, ERR_CUDA = 7, ERR_ALLOC = 8, ERR_INCONSISTENT = 9;

    private final int status;

    public DrmasException(int status, String message) {
        super(message + " (status " + status + ")");
        this.status = status;
    }

    /** The DRMAS_ERR_* code. */
    public int status() {
        return status;
    }
}
