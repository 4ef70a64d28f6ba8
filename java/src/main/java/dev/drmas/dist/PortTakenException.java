// PortTakenException.java — rank 0 cannot host the store: MASTER_PORT is taken on its machine. Its own
// type so that `drmas launch`, which picked that port itself, can tell it from other failures and start
// the ranks again on another port (another program may bind a port between the launcher's pick and rank 0).
package dev.drmas.dist;

public final class PortTakenException extends DistributedException {
    public PortTakenException(String message, Throwable cause) {
        super(message, cause);
    }
}
