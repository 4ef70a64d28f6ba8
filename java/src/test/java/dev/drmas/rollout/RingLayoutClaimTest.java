// RingLayoutClaimTest.java — both rollout engines tell CausalLm that their rows have the ring
// layout (CausalLm.decodeRing), so that a decoding step on the general path (a GPU's) makes its mask
// on the device without reading the whole validity array each step. The claim must hold: checked
// every step here (CausalLm.checkRingClaims) over calls whose rows join, stop at different steps and
// go round the cache, with the same tokens as without the checks; and without them a step makes no
// layout check at all.
package dev.drmas.rollout;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.model.CausalLm;
import dev.drmas.model.Family;
import dev.drmas.model.ModelConfig;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import org.bytedeco.pytorch.Device;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

class RingLayoutClaimTest {
    @BeforeAll
    static void threads() {
        torch.set_num_threads(2);
    }

    @ParameterizedTest
    @EnumSource(Generator.Engine.class)
    void theEnginesRowsAreRingSegmentsEveryStep(Generator.Engine engine) {
        // float64 on the CPU: the general decoding path, as on a GPU
        CausalLm m = CausalLm.random(ModelConfig.tiny(Family.QWEN3, 61), 23, ScalarType.Double, new Device("cpu"));
        try {
            List<Request> reqs = new ArrayList<>();
            for (int i = 0; i < 9; i++) {
                int[] prompt = new int[1 + (i * 5) % 6];
                for (int j = 0; j < prompt.length; j++) prompt[j] = 11 + (7 * i + 3 * j) % 40;
                reqs.add(new Request(prompt, i));
            }
            // stop tokens: rows finish at different steps; 3 rows of (6 + 12) slots: requests wait and join
            GenerationConfig cfg = new GenerationConfig(new SamplingParams(1.0, 0, 1.0), 12, Set.of(1, 2, 3, 4, 5, 6), List.of(),
                    null, 7, true, 0);
            Generator g = new Generator(m, 3 * 18, engine);
            long c0 = CausalLm.layoutChecks();
            List<Completion> plain = g.generate(reqs, cfg);
            assertEquals(0, CausalLm.layoutChecks() - c0, engine + ": a decoding step checks no layout");
            Generator.Stats st = g.lastStats();
            if (engine == Generator.Engine.CONTINUOUS) {
                assertTrue(st.admissions() > 1 && st.wrapped(), "rows join later and the column goes round the cache: " + st);
            }
            int stopped = 0;
            for (Completion c : plain) if (c.length() < 12) stopped++;
            assertTrue(stopped > 0 && stopped < reqs.size(), stopped + " of " + reqs.size() + " rows stopped before the budget");

            m.checkRingClaims(true);  // each step: every slot of every row against the positions, or IllegalStateException
            long c1 = CausalLm.layoutChecks();
            List<Completion> checked = g.generate(reqs, cfg);
            assertTrue(CausalLm.layoutChecks() - c1 >= 11, engine + ": the claim checked every step");
            for (int i = 0; i < reqs.size(); i++) {
                assertArrayEquals(plain.get(i).tokens(), checked.get(i).tokens(), "request " + i);
            }
        } finally {
            m.close();
        }
    }
}
