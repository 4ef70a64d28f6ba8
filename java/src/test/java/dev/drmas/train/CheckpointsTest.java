// CheckpointsTest.java — a checkpoint of two models and their optimisers reloads to identical
// weights and optimiser state; the newest complete checkpoint is found and half-written
// (temporary) folders are ignored; missing parts are errors that name them, and optimiser state of
// another shape (a transposed moment, which has the right element count) is refused naming its file.
package dev.drmas.train;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.drmas.algo.LossConfig;
import dev.drmas.model.CausalLm;
import dev.drmas.model.Family;
import dev.drmas.model.ModelConfig;
import dev.drmas.model.Tensors;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class CheckpointsTest {
    @TempDir
    Path dir;

    @Test
    void roundTripAndLatest() throws Exception {
        torch.set_num_threads(2);
        Checkpoints cps = new Checkpoints(dir.resolve("checkpoints"));
        assertTrue(cps.latest().isEmpty());
        try (CausalLm a = CausalLm.random(ModelConfig.tiny(Family.QWEN3, 40), 1);
             CausalLm b = CausalLm.random(ModelConfig.tiny(Family.LLAMA, 40), 2);
             AdamW oa = new AdamW(a.parameters(), AdamW.Settings.of(1e-2))) {
            // one real update so that the optimiser state is not all zeros
            new PpoUpdater(a, oa, null, new PpoUpdater.Settings(1, 4, 4, 1.0, 0, 1.0, LossConfig.defaults(), 1))
                    .update(PpoUpdaterTest.rows(1, 4).stream()
                            .map(r -> new PpoUpdater.Row(r.promptIds(), r.responseIds().length == 0 ? new int[] {1} : r.responseIds(), r.advantage()))
                            .map(r -> new PpoUpdater.Row(r.promptIds(), java.util.Arrays.stream(r.responseIds()).map(t -> t % 40).toArray(),
                                    r.advantage()))
                            .map(r -> new PpoUpdater.Row(java.util.Arrays.stream(r.promptIds()).map(t -> t % 40).toArray(), r.responseIds(),
                                    r.advantage()))
                            .toList(), 3);
            ObjectNode state = new ObjectMapper().createObjectNode().put("data_position", 17);
            Map<String, CausalLm> models = new LinkedHashMap<>();
            models.put("solver", a);
            models.put("verifier", b);
            cps.save(2, models, Map.of("solver", oa), state);
            Path p5 = cps.save(5, models, Map.of("solver", oa), state);
            Files.createDirectories(cps.root().resolve("step_000009.tmp"));  // a crash mid-save
            Files.createDirectories(cps.root().resolve("step_000007"));      // no state file: incomplete
            assertEquals(p5, cps.latest().orElseThrow());
            assertEquals(5, Checkpoints.state(p5).get("step").asLong());
            assertEquals(17, Checkpoints.state(p5).get("data_position").asInt());

            try (CausalLm a2 = Checkpoints.loadModel(p5, "solver", ScalarType.Float, a.device());
                 AdamW oa2 = new AdamW(a2.parameters(), AdamW.Settings.of(1e-2));
                 PointerScope scope = new PointerScope()) {
                Checkpoints.loadOptimizer(p5, "solver", oa2);
                assertEquals(oa.steps(), oa2.steps());
                for (String k : a.parameters().keySet()) {
                    assertArrayEquals(Tensors.toFloats(a.parameters().get(k)), Tensors.toFloats(a2.parameters().get(k)), k);
                }
                for (String k : oa.state().keySet()) {
                    assertArrayEquals(Tensors.toFloats(oa.state().get(k)), Tensors.toFloats(oa2.state().get(k)), k);
                }
                assertTrue(oa.steps() > 0);
            }
            var e = assertThrows(IllegalArgumentException.class,
                    () -> Checkpoints.loadModel(p5, "critic", ScalarType.Float, a.device()));
            assertTrue(e.getMessage().contains("has no model 'critic'"), e.getMessage());
            List<String> names = Files.list(p5.resolve("models").resolve("verifier")).map(x -> x.getFileName().toString()).sorted().toList();
            assertTrue(names.contains("config.json") && names.contains("model.safetensors"), names.toString());
        }
    }

    @Test
    void aSaveThatFailsLeavesNeitherACheckpointNorItsTemporaryFolder() throws Exception {
        Checkpoints cps = new Checkpoints(dir.resolve("checkpoints"));
        try (CausalLm a = CausalLm.random(ModelConfig.tiny(Family.QWEN3, 40), 1);
             AdamW oa = new AdamW(a.parameters(), AdamW.Settings.of(1e-2))) {
            ObjectNode state = new ObjectMapper().createObjectNode();
            // what goes in besides the weights (the trainer's tokenizer files) fails after the weights are written
            var e = assertThrows(java.io.IOException.class, () -> cps.save(3, Map.of("policy", a), Map.of("policy", oa), state, tmp -> {
                assertTrue(Files.isRegularFile(tmp.resolve("models/policy/model.safetensors")), "extras come after the weights");
                assertTrue(!Files.exists(cps.dir(3)), "and before the rename");
                throw new java.io.IOException("disk full (simulated by the extra)");
            }));
            assertTrue(e.getMessage().contains("cannot write the checkpoint of step 3 (in " + cps.root().resolve("step_000003.tmp")
                    + "; removed): disk full"), e.getMessage());
            try (var files = Files.list(cps.root())) {
                assertEquals(List.of(), files.toList());
            }
            // the extra's files are part of the checkpoint once it has its name
            Path p = cps.save(4, Map.of("policy", a), Map.of("policy", oa), state,
                    tmp -> Files.writeString(tmp.resolve("models/policy/tokenizer.json"), "{}"));
            assertTrue(Files.isRegularFile(p.resolve("models/policy/tokenizer.json")));
        }
    }

    @Test
    void optimizerStateThatDoesNotFitIsRefusedNamingTheFileAndTensor() throws Exception {
        Checkpoints cps = new Checkpoints(dir.resolve("checkpoints"));
        try (CausalLm a = CausalLm.random(ModelConfig.tiny(Family.QWEN3, 40), 1);
             AdamW oa = new AdamW(a.parameters(), AdamW.Settings.of(1e-2))) {
            Path p = cps.save(1, Map.of("solver", a), Map.of("solver", oa), new ObjectMapper().createObjectNode());
            Path f = p.resolve("optim/solver.safetensors");
            // a parameter that is not square: its moment transposed has the right element count
            String wide = a.parameters().entrySet().stream().filter(e -> e.getValue().dim() == 2 && e.getValue().size(0) != e.getValue().size(1))
                    .map(Map.Entry::getKey).findFirst().orElseThrow();
            long[] shape = AdamW.shape(a.parameters().get(wide));
            String noTensor = f + ": optimizer state has no tensor exp_avg.model.norm.weight";
            String transposed = f + ": optimizer state exp_avg_sq." + wide + " has shape [" + shape[1] + ", " + shape[0]
                    + "], the parameter has [" + shape[0] + ", " + shape[1] + "]";
            for (String want : List.of(noTensor, transposed)) {
                try (PointerScope scope = new PointerScope()) {
                    Map<String, org.bytedeco.pytorch.Tensor> state = new LinkedHashMap<>(oa.state());
                    if (want == noTensor) state.remove("exp_avg.model.norm.weight");
                    else state.put("exp_avg_sq." + wide, state.get("exp_avg_sq." + wide).t().contiguous());
                    dev.drmas.model.SafeTensorsWriter.write(f, state);
                }
                // unsharded, and sharded (each rank slices the flat tensor: the element count alone let a transposed one in)
                try (AdamW fresh = new AdamW(a.parameters(), AdamW.Settings.of(1e-2));
                     ModelOptimizer sharded = ModelOptimizer.sharded(a.parameters(), AdamW.Settings.of(1e-2),
                             dev.drmas.dist.Collective.single(), 4096)) {
                    for (ModelOptimizer o : List.of(ModelOptimizer.wrap(fresh), sharded)) {
                        var e = assertThrows(IllegalArgumentException.class, () -> Checkpoints.loadOptimizer(p, "solver", o));
                        assertEquals(want, e.getMessage(), o.sharded() ? "sharded" : "unsharded");
                    }
                }
            }
        }
    }
}
