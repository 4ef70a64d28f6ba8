// DistributedException.java — a data-parallel run cannot go on: a rank died or stalls, the master
// port is taken, or the ranks diverged. The message names the rank and the collective.
package dev.drmas.dist;

public class DistributedException extends RuntimeException {
    public DistributedException(String message) {
        super(message);
    }

    public DistributedException(String message, Throwable cause) {
        super(message, cause);
    }
}
