// AbiTest.java — the Java copy of drmas.h against the library it loads: the config structs'
// sizes and field offsets (LibDrmas's named layouts vs offsetof/sizeof, via drmas_abi_value),
// every index constant of AbiIndices and every status code of DrmasException, by name. Also
// that the comparison does fail on a layout that differs, so that passing means something.
package dev.drmas.bindings;

import static java.lang.foreign.ValueLayout.JAVA_DOUBLE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemoryLayout;
import java.lang.foreign.StructLayout;
import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.util.List;
import org.junit.jupiter.api.Test;

class AbiTest {
    @Test
    void configStructsMatchTheLibrary() {
        assertEquals(List.of(), LibDrmas.layoutMismatches(LibDrmas.NORM_CONFIG));
        assertEquals(List.of(), LibDrmas.layoutMismatches(LibDrmas.LOSS_CONFIG));
        assertEquals(List.of(), LibDrmas.layoutMismatches(LibDrmas.LMHEAD_CONFIG));
        assertEquals(56, LibDrmas.abiValue("drmas_lmhead_config"));
        assertEquals(40, LibDrmas.abiValue("drmas_norm_config"));
        assertEquals(48, LibDrmas.abiValue("drmas_loss_config"));
        LibDrmas.requireAbi();
    }

    @Test
    void aLayoutThatDiffersIsReported() {
        // the pre-descriptor drmas_norm_config: a mode number, 32 bytes
        StructLayout old = MemoryLayout.structLayout(JAVA_INT.withName("mode"), JAVA_INT.withName("global_pooling"),
                JAVA_INT.withName("singleton"), JAVA_INT.withName("ddof"), JAVA_INT.withName("scale_by_std"),
                JAVA_INT.withName("reserved"), JAVA_DOUBLE.withName("eps")).withName("drmas_norm_config");
        List<String> m = LibDrmas.layoutMismatches(old);
        assertTrue(m.contains("sizeof(drmas_norm_config) is 40 in the library, 32 in Java"), m.toString());
        assertTrue(m.contains("the library's drmas_norm_config has no field mode"), m.toString());
        assertTrue(m.contains("offsetof(drmas_norm_config, eps) is 32 in the library, 24 in Java"), m.toString());
        // two fields swapped: same size, wrong offsets
        StructLayout swapped = MemoryLayout.structLayout(JAVA_DOUBLE.withName("clip_high"), JAVA_DOUBLE.withName("clip_low"),
                JAVA_DOUBLE.withName("dual_clip"), JAVA_DOUBLE.withName("kl_coef"), JAVA_DOUBLE.withName("normalizer"),
                JAVA_INT.withName("kl_type"), JAVA_INT.withName("per_row_mean")).withName("drmas_loss_config");
        assertEquals(List.of("offsetof(drmas_loss_config, clip_high) is 8 in the library, 0 in Java",
                "offsetof(drmas_loss_config, clip_low) is 0 in the library, 8 in Java"), LibDrmas.layoutMismatches(swapped));
        assertEquals(List.of("the library has no struct drmas_nothing"),
                LibDrmas.layoutMismatches(MemoryLayout.structLayout().withName("drmas_nothing")));
        assertEquals(-1, LibDrmas.abiValue("DRMAS_NO_SUCH_CONSTANT"));
    }

    /** Every public static int of {@code type} whose name starts with {@code prefix}, against DRMAS_ + its name. */
    private static int checkConstants(Class<?> type, String prefix) throws IllegalAccessException {
        int n = 0;
        for (Field f : type.getDeclaredFields()) {
            int mod = f.getModifiers();
            if (!Modifier.isStatic(mod) || !Modifier.isPublic(mod) || f.getType() != int.class || !f.getName().startsWith(prefix)) {
                continue;
            }
            assertEquals(LibDrmas.abiValue("DRMAS_" + f.getName()), f.getInt(null), type.getSimpleName() + "." + f.getName());
            n++;
        }
        return n;
    }

    @Test
    void indexConstantsAndStatusCodesMatchTheLibrary() throws IllegalAccessException {
        assertEquals(10, checkConstants(AbiIndices.class, "DIAG_"));
        assertEquals(9, checkConstants(AbiIndices.class, "LOSS_"));
        assertEquals(2, checkConstants(AbiIndices.class, "LMHEAD_"));
        assertEquals(9, checkConstants(DrmasException.class, "ERR_"));
        assertEquals(LibDrmas.abiValue("DRMAS_DEVICE_CPU"), Backend.CPU.device());
        assertEquals(LibDrmas.abiValue("DRMAS_DEVICE_CUDA"), Backend.CUDA.device());
    }
}
