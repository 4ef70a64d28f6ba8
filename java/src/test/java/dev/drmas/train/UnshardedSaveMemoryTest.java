// UnshardedSaveMemoryTest.java — an unsharded optimiser's checkpoint (full precision, and bf16
// weights with fp32 masters) is streamed to its files one tensor at a time: under the exact heap
// counter the pom preloads, a save adds a few tensors' bytes, not a host copy of every AdamW moment
// (8 bytes a parameter) and every master (4) held until the last is written, as it did wherever
// the state needed a copy to be written (on a GPU every tensor; on the CPU a moment or master of a
// parameter that is not contiguous, which AdamW's zeros_like and the masters' clone keep so). Its
// files are, byte for byte, the whole state's written at once (what the save wrote before), and a
// save that fails after them leaves the previous checkpoint as it was. On a GPU (when there is
// one) the same: a slice of a tensor on the host at a time. The resume's bound is
// ResumeMemoryTest's, the sharded save's ShardedCheckpointTest's.
package dev.drmas.train;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import dev.drmas.model.CausalLm;
import dev.drmas.model.SafeTensorsWriter;
import dev.drmas.testing.HeapCounter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.Device;
import org.bytedeco.pytorch.NoGradGuard;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class UnshardedSaveMemoryTest {
    static final List<String> FILES = List.of("optim/policy.safetensors", "master/policy/model.safetensors");

    @TempDir
    Path dir;

    /**
     * Zeros of ShardedOptimizerTest's shapes in {@code dtype}; {@code transposed}: every matrix the
     * transpose of a contiguous one (a [227, 241] of strides [1, 227]), as a tied or transposed
     * weight may be, which its moments and master then share.
     */
    static Map<String, Tensor> weights(ScalarType dtype, boolean transposed) {
        Map<String, Tensor> p = new LinkedHashMap<>();
        ShardedOptimizerTest.shapes().forEach((k, s) -> p.put(k, transposed && s.length == 2
                ? torch.zeros(s[1], s[0]).to(dtype).t() : torch.zeros(s).to(dtype)));
        return p;
    }

    /** An unsharded optimiser of {@code w} holding {@code state} after STEPS steps (the weights are the masters). */
    static ModelOptimizer holding(ShardedCheckpointTest.State state, Map<String, Tensor> w, boolean mixed) {
        ModelOptimizer o = ModelOptimizer.create(w, ShardedCheckpointTest.OPT, mixed);
        if (mixed) {
            o.loadMasterWeights(state.masters());
        } else {
            try (NoGradGuard ng = new NoGradGuard()) {
                state.masters().forEach((k, t) -> w.get(k).copy_(t));
            }
        }
        o.load(state.moments(), ShardedCheckpointTest.STEPS);
        return o;
    }

    static Path save(Checkpoints cps, long step, ModelOptimizer o) throws Exception {
        return cps.write(step, Map.of(), Map.of("policy", o), new ObjectMapper().createObjectNode(), tmp -> { });
    }

    @Test
    void anUnshardedSaveStreamsOneTensorAtATimeAndWritesTheWholeStatesBytes() throws Exception {
        HeapCounter.require();
        // on the CPU the state held whole wherever it needed a copy to be written: the transposed matrices' moments and masters
        assertStreamed(new Device("cpu"), false, true);
    }

    @Test
    @Tag("gpu")
    void onAGpuTheSaveCopiesASliceToTheHostAtATimeNotTheState() throws Exception {
        boolean cuda = torch.cuda_is_available();
        if ("1".equals(System.getenv("DRMAS_REQUIRE_GPU"))) {
            assertTrue(cuda, "DRMAS_REQUIRE_GPU=1 but LibTorch sees no CUDA device");
        } else {
            Assumptions.assumeTrue(cuda, "no CUDA device (LibTorch sees none): skipping the GPU save's host memory");
        }
        HeapCounter.require();
        // every tensor needs a host copy there: the save used to keep all of them until the last was written
        assertStreamed(new Device("cuda:0"), false);
    }

    /**
     * Saves an optimiser of ShardedOptimizerTest's shapes on {@code device}, in full and mixed
     * precision, with each {@code transposed} layout: the files are the whole state's written at
     * once, and a save adds no more than a few tensors' bytes to the host heap at its peak.
     */
    private void assertStreamed(Device device, boolean... layouts) throws Exception {
        torch.set_num_threads(1);
        ShardedCheckpointTest.State state = ShardedCheckpointTest.State.random();
        long largest = 0;
        for (Tensor t : state.masters().values()) largest = Math.max(largest, 4 * t.numel());
        // a few of the largest tensor's fp32 bytes (a contiguous copy of one, a slice on its way to
        // the host) and the JVM's own
        long bound = 4 * largest + HeapCounter.JVM_SLACK, moments = 8 * ShardedOptimizerTest.parameters();
        assertTrue(moments > 4 * bound, "the moments (" + moments + " bytes) must dwarf the bound (" + bound + ")");
        Checkpoints cps = new Checkpoints(dir.resolve("checkpoints"));
        long step = 0;
        Map<String, Long> added = new LinkedHashMap<>();
        for (boolean transposed : layouts) {
            for (boolean mixed : new boolean[] {false, true}) {
                ScalarType dtype = mixed ? ScalarType.BFloat16 : ScalarType.Float;
                String what = (mixed ? "bf16 weights with fp32 masters" : "full precision") + (transposed ? ", transposed matrices" : "");
                try (PointerScope scope = new PointerScope()) {
                    Map<String, Tensor> w = weights(dtype, transposed);
                    w.replaceAll((k, t) -> t.to(device, dtype));
                    try (ModelOptimizer o = holding(state, w, mixed)) {
                        Tensor m = o.state().get("exp_avg.layers.0.proj.weight");
                        assertEquals(transposed, !m.is_contiguous(), what + ": the moments' layout");
                        assertEquals(device.is_cuda(), m.is_cuda(), what + ": the moments' device");
                        added.put(what, leastAdded(cps, step, o, mixed, what));
                        step += 4;
                    }
                }
            }
        }
        // every case in the message: which layouts and precisions held the whole state
        assertTrue(added.values().stream().allMatch(a -> a <= bound), "the saves on " + device.str().getString() + " added " + added
                + " bytes to the heap at their peaks: more than a few tensors (" + bound + ") in some; every moment is " + moments + " bytes");
    }

    /**
     * Saves {@code o} as steps after {@code step}: the first's files against the old save's (the
     * whole state copied to the host at once, through SafeTensorsWriter), then the least heap added
     * of three more, each started once the JIT is quiet (HeapCounter.leastAdded: the JVM's own
     * native allocations, its compilers' arenas, may fall within a reading; a copy of the whole
     * state is in every one).
     */
    private long leastAdded(Checkpoints cps, long step, ModelOptimizer o, boolean mixed, String what) throws Exception {
        Path first = save(cps, ++step, o);
        Path old = dir.resolve("old").resolve(Long.toString(step));
        Files.createDirectories(old.resolve("optim"));
        try (PointerScope copies = new PointerScope()) {
            Map<String, Tensor> whole = new LinkedHashMap<>(), masters = new LinkedHashMap<>();
            o.state().forEach((k, t) -> whole.put(k, t.detach().cpu().contiguous()));
            SafeTensorsWriter.write(old.resolve(FILES.get(0)), whole);
            if (mixed) {
                o.masterWeights().forEach((k, t) -> masters.put(k, t.detach().cpu().contiguous()));
                SafeTensorsWriter.writeCheckpoint(old.resolve("master").resolve("policy"), masters, CausalLm.DEFAULT_SHARD_BYTES);
            }
        }
        for (String f : mixed ? FILES : FILES.subList(0, 1)) {
            assertArrayEquals(Files.readAllBytes(old.resolve(f)), Files.readAllBytes(first.resolve(f)), what + ": " + f);
        }
        assertEquals(mixed, Files.isDirectory(first.resolve("master")), what + ": master/");
        // each reading starts once the JIT is quiet: a fresh-clone CI run read 9.42 MB in all three
        // readings of the first case (0.07-0.25 MB in the others), most likely the compilations the
        // first save started, running beside them
        long[] next = {step};
        long least = HeapCounter.leastAdded(3, () -> {
            try {
                Checkpoints.deleteTree(save(cps, ++next[0], o));
            } catch (Exception e) {
                throw new IllegalStateException(what + ": a save", e);
            }
        });
        Checkpoints.deleteTree(first);
        return least;
    }

    @Test
    void aSaveThatFailsAfterTheStreamedStateLeavesThePreviousCheckpoint() throws Exception {
        torch.set_num_threads(1);
        ShardedCheckpointTest.State state = ShardedCheckpointTest.State.random();
        Checkpoints cps = new Checkpoints(dir.resolve("checkpoints"));
        try (PointerScope scope = new PointerScope();
             ModelOptimizer o = holding(state, weights(ScalarType.BFloat16, false), true)) {
            Path previous = save(cps, 1, o);
            Map<String, byte[]> before = new LinkedHashMap<>();
            for (String f : FILES) before.put(f, Files.readAllBytes(previous.resolve(f)));
            // the same state under step 1 and step 2; step 2's extras fail once the optimiser's files are written
            var e = assertThrows(java.io.IOException.class, () -> cps.write(2, Map.of(), Map.of("policy", o),
                    new ObjectMapper().createObjectNode(), tmp -> {
                        for (String f : FILES) assertEquals(before.get(f).length, Files.size(tmp.resolve(f)), "streamed before the extras: " + f);
                        throw new java.io.IOException("disk full (simulated by the extra)");
                    }));
            assertTrue(e.getMessage().contains("cannot write the checkpoint of step 2 (in " + cps.root().resolve("step_000002.tmp")
                    + "; removed): disk full"), e.getMessage());
            assertFalse(Files.exists(cps.root().resolve("step_000002.tmp")), "the temporary folder is removed");
            assertEquals(previous, cps.latest().orElseThrow());
            for (String f : FILES) assertArrayEquals(before.get(f), Files.readAllBytes(previous.resolve(f)), f);
        }
    }
}
