// LossScalerTest.java — the dynamic loss scale's bounds: halving stops at 1 (Megatron's and DeepSpeed's
// min_loss_scale), or at the start where that is below 1, and doubling stops where float32 ends, so that a
// run of non-finite steps cannot drive 1/S past float32 (every later step NaN) and growth cannot overflow.
package dev.drmas.train;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import org.junit.jupiter.api.Test;

class LossScalerTest {
    @Test
    void halvingStopsAtOne() {
        LossScaler s = LossScaler.dynamic(8, 2000);
        for (int i = 0; i < 200; i++) s.update(false);
        assertEquals(1.0, s.scale(), "200 skipped steps from 8");
        s.update(true);
        assertEquals(1.0, s.scale());
    }

    @Test
    void aStartBelowOneIsItsOwnFloor() {
        LossScaler s = LossScaler.dynamic(0.25, 1);
        s.update(false);
        assertEquals(0.25, s.scale());
        s.update(true);
        assertEquals(0.5, s.scale(), "grows as before");
    }

    @Test
    void doublingStopsWhereFloat32Ends() {
        LossScaler s = LossScaler.dynamic(0x1p126, 1);
        s.update(true);
        assertEquals(0x1p127, s.scale());
        s.update(true);
        assertEquals(0x1p127, s.scale(), "2^128 is past float32");
        assertThrows(IllegalArgumentException.class, () -> s.restore(1e39, 0));
        assertThrows(IllegalArgumentException.class, () -> LossScaler.fixed(1e39));
    }
}
