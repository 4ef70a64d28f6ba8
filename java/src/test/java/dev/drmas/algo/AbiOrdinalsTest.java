// AbiOrdinalsTest.java — the algo enums whose ordinals cross the C ABI as drmas.h values
// (GlobalPooling → DRMAS_POOL_*, SingletonPolicy → DRMAS_SINGLETON_*, KlEstimator → DRMAS_KL_*)
// against the loaded library's constants, by name, so that reordering an enum or a #define fails here.
package dev.drmas.algo;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.drmas.bindings.LibDrmas;
import org.junit.jupiter.api.Test;

class AbiOrdinalsTest {
    private static <E extends Enum<E>> void check(Class<E> type, String prefix) {
        for (E e : type.getEnumConstants()) {
            assertEquals(LibDrmas.abiValue(prefix + e.name()), e.ordinal(), type.getSimpleName() + "." + e.name());
        }
    }

    @Test
    void ordinalsAreTheLibrarysValues() {
        check(GlobalPooling.class, "DRMAS_POOL_");
        check(SingletonPolicy.class, "DRMAS_SINGLETON_");
        check(KlEstimator.class, "DRMAS_KL_");
    }
}
