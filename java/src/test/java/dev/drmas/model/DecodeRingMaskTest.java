// DecodeRingMaskTest.java — CausalLm.decodeAt on the general path (a GPU's; here float64, and
// float32 without the CPU decoding step) makes the attention mask on the device from the positions
// when the rows are laid out as the rollout engines lay them (a ring segment of position + 1 slots
// ending at the written slot): its logits must be bit for bit those of forwardAt given the same
// mask as an int64 tensor (the mask decodeAt uploaded before), over steps whose rows join, finish
// and go round the cache. Other layouts keep the uploaded mask, with the same bits. The sampler's
// uniforms ride in the same upload, their bits intact.
package dev.drmas.model;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.Device;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class DecodeRingMaskTest {
    static final int VOCAB = 61, ROWS = 3, CAPACITY = 7;

    @BeforeAll
    static void threads() {
        torch.set_num_threads(2);
    }

    @ParameterizedTest
    @ValueSource(booleans = {true, false})
    void theDeviceMaskGivesTheUploadedMasksBits(boolean float64) {
        ModelConfig c = ModelConfig.tiny(Family.QWEN3, VOCAB);
        try (PointerScope scope = new PointerScope();
             CausalLm m = float64 ? CausalLm.random(c, 17, ScalarType.Double, new Device("cpu")) : CausalLm.random(c, 17);
             KvCache a = m.newCache(ROWS, CAPACITY); KvCache b = m.newCache(ROWS, CAPACITY)) {
            m.decodeStepOn = false;  // float32 too on the general path
            // row r joins at column start[r] and runs until its ring would fill the cache, then is free
            int[] start = {0, 2, 5};
            long[] valid = new long[ROWS * CAPACITY];
            for (int col = 0; col < 3 * CAPACITY; col++) {
                int slot = col % CAPACITY, slots = col >= CAPACITY ? CAPACITY : slot + 1;
                long[] ids = new long[ROWS], pos = new long[ROWS];
                for (int r = 0; r < ROWS; r++) {
                    long p = col - start[r];
                    java.util.Arrays.fill(valid, r * CAPACITY, (r + 1) * CAPACITY, 0);
                    if (p < 0 || p >= CAPACITY - 1) continue;  // free: position 0, nothing valid
                    ids[r] = (7L * col + 3 * r) % VOCAB;
                    pos[r] = p;
                    for (int k = 0; k <= p; k++) valid[r * CAPACITY + Math.floorMod(col - k, CAPACITY)] = 1;
                }
                assertTrue(CausalLm.ringLayout(pos, valid, CAPACITY, slots, CAPACITY, slot), "column " + col);
                long u0 = Tensors.uploads();
                double[] uniforms = {col / 64.0, 0.999999, Math.ulp(1.0)};
                CausalLm.Decoded d = m.decode(ids, pos, valid, CAPACITY, slots, a, slot, col % 2 == 0 ? uniforms : null);
                Tensor got = d.logits();
                assertEquals(1, Tensors.uploads() - u0, "column " + col + ": the ids, positions and uniforms in one upload, no mask");
                if (col % 2 == 0) assertArrayEquals(uniforms, Tensors.toDoubles(d.uniforms()), "column " + col + ": the uniforms' bits");
                else assertEquals(null, d.uniforms());
                long[] mask = new long[ROWS * slots];
                for (int r = 0; r < ROWS; r++) System.arraycopy(valid, r * CAPACITY, mask, r * slots, slots);
                Tensor want = m.forwardAt(Tensors.longs(ids, ROWS, 1), Tensors.longs(pos, ROWS, 1), Tensors.longs(mask, ROWS, slots), b,
                        slot);
                assertTrue(torch.equal(want, got), "column " + col + ": decodeAt's logits differ from forwardAt's");
            }
        }
    }

    @Test
    void anotherLayoutKeepsItsUploadedMask() {
        ModelConfig c = ModelConfig.tiny(Family.QWEN3, VOCAB);
        try (PointerScope scope = new PointerScope(); CausalLm m = CausalLm.random(c, 17, ScalarType.Double, new Device("cpu"));
             KvCache a = m.newCache(ROWS, CAPACITY); KvCache b = m.newCache(ROWS, CAPACITY)) {
            long[] ids = {4, 9, 13}, pos = {3, 1, 2};
            // row 0 has a hole at slot 1: not the ring of its position
            long[] valid = new long[ROWS * CAPACITY];
            for (int j : new int[] {0, 2, 3, 4}) valid[j] = 1;
            for (int j : new int[] {3, 4}) valid[CAPACITY + j] = 1;
            for (int j : new int[] {2, 3, 4}) valid[2 * CAPACITY + j] = 1;
            int slots = 5, slot = 4;
            assertFalse(CausalLm.ringLayout(pos, valid, CAPACITY, slots, CAPACITY, slot));
            long u0 = Tensors.uploads();
            Tensor got = m.decodeAt(ids, pos, valid, CAPACITY, slots, a, slot);
            assertEquals(2, Tensors.uploads() - u0, "the ids and positions, then the mask");
            long[] mask = new long[ROWS * slots];
            for (int r = 0; r < ROWS; r++) System.arraycopy(valid, r * CAPACITY, mask, r * slots, slots);
            Tensor want = m.forwardAt(Tensors.longs(ids, ROWS, 1), Tensors.longs(pos, ROWS, 1), Tensors.longs(mask, ROWS, slots), b, slot);
            assertTrue(torch.equal(want, got));
        }
    }
}
