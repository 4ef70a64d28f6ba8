// Scopes.java — the two moves of drmas's native-memory rule (JavaCPP PointerScope): a method
// computes inside its own scope, retains what it returns, and after closing the scope hands it to
// the caller's innermost scope; long-lived tensors (parameters, KV cache) are retained and owned by
// their object until its close().
package dev.drmas.model;

import org.bytedeco.javacpp.Pointer;
import org.bytedeco.javacpp.PointerScope;

public final class Scopes {
    private Scopes() {
    }

    /** Keeps {@code p} alive past the close of the scope it was created in (+1 reference). */
    public static <P extends Pointer> P retain(P p) {
        p.retainReference();
        return p;
    }

    /**
     * After the inner scope closed: moves {@code p}'s extra reference from {@link #retain} to the
     * caller's innermost scope. With no scope open, {@code p} is left to the garbage collector.
     */
    public static <P extends Pointer> P adopt(P p) {
        PointerScope outer = PointerScope.getInnerScope();
        if (outer != null) {
            outer.attach(p);      // +1 for the caller's scope
            p.releaseReference(); // -1 for retain()
        }
        return p;
    }
}
