// SftMastersTest.java — a mixed-precision warm start (`drmas sft` of a bfloat16 or float16 model with
// fp32 masters) saves its masters in sft/master/<id> beside the rounded sft/models/<id>, and RL starts
// its masters from them: in a later run from the run's own sft/ or from run.warm_start, and in the
// trainer that ran the warm start. Once only the rounded weights were saved and reopened, the masters'
// low bits lost. A run in another dtype than the warm start's takes the masters too: a float32 model
// has them exactly, a bfloat16 one from a float16 warm start rounds them once (not the float16
// weights again). A warm start without masters still starts from its weights; masters that are not
// those of the warm start's weights are refused, naming the folder. A warm start stopped anywhere in
// its save gives a run one warm start's weights with their own masters (put back in place in the run's own
// folder, read where the save left them in another run's).
package dev.drmas.train;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.config.RunConfig;
import dev.drmas.model.CausalLm;
import dev.drmas.model.SafeTensors;
import dev.drmas.model.SafeTensorsWriter;
import dev.drmas.model.Tensors;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.Device;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class SftMastersTest {
    @TempDir
    Path tmp;

    // (a Device per use, not a static one: the class may first load inside a caller's PointerScope, which would free it)
    private static Device cpu() {
        return new Device("cpu");
    }

    private static RunConfig config(Path out, String... overrides) {
        List<String> o = new ArrayList<>(List.of("run.output_dir=" + out, "trainer.steps=1", "trainer.save_freq=1", "trainer.eval_freq=0",
                "ppo.epochs=1", "sft.steps=3"));
        o.addAll(List.of(overrides));
        return RunConfig.parse(TrainerEndToEndTest.YAML, o);
    }

    /** Runs `drmas sft` (as SftCommand: run.resume=never) of {@code cfg}; returns the run folder. */
    private static Path sft(RunConfig cfg) throws Exception {
        try (Trainer t = Trainer.open(cfg.withOverrides(List.of("run.resume=never")), TrainerEndToEndTest.QUIET)) {
            t.sft();
        }
        return cfg.run().runDir();
    }

    /**
     * The masters of {@code p} are the fp32 values in {@code dir} bit for bit, its weights (of its
     * reduced dtype) their rounding, and the two differ somewhere (else the masters could be either).
     */
    static void assertMastersAre(Path dir, Policies.Policy p) {
        ScalarType dtype = p.model().dtype();
        assertTrue(dtype == ScalarType.BFloat16 || dtype == ScalarType.Half, "a reduced dtype: " + dtype);
        assertTrue(p.optim().keepsMasterWeights(), "fp32 masters");
        try (PointerScope scope = new PointerScope(); SafeTensors st = SafeTensors.open(dir)) {
            Map<String, Tensor> masters = p.optim().gatherState().master();
            assertEquals(p.model().parameters().keySet(), st.tensors().keySet(), dir + " holds a master of every parameter");
            long between = 0;
            for (Map.Entry<String, Tensor> e : p.model().parameters().entrySet()) {
                String name = e.getKey();
                assertEquals(ScalarType.Float, st.info(name).dtype().scalarType(), dir + ": " + name + " is fp32");
                float[] exact = Tensors.toFloats(st.get(name, ScalarType.Float, cpu()));
                float[] rounded = Tensors.toFloats(st.get(name, dtype, cpu()).to(ScalarType.Float));
                assertArrayEquals(exact, Tensors.toFloats(masters.get(name).to(ScalarType.Float)), "master " + name + " is the file's value");
                assertArrayEquals(rounded, Tensors.toFloats(e.getValue().to(ScalarType.Float)), "weight " + name + " is its rounding");
                for (int i = 0; i < exact.length; i++) if (Float.floatToIntBits(exact[i]) != Float.floatToIntBits(rounded[i])) between++;
            }
            assertTrue(between > 0, "the masters hold values between the weights' dtype's");
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"bfloat16", "float16"})
    void aRunFromAMixedPrecisionWarmStartStartsItsMastersFromTheWarmStartsMasters(String dtype) throws Exception {
        Path run = sft(config(tmp.resolve("out"), "models.policy.dtype=" + dtype));
        Path masters = run.resolve("sft").resolve("master").resolve("policy");
        assertTrue(Files.isRegularFile(masters.resolve("model.safetensors")), "drmas sft wrote its masters: " + masters);
        assertFalse(Files.exists(run.resolve("sft").resolve("master.tmp")), "no temporary folder left");
        // the run's own sft/
        try (Trainer t = Trainer.open(config(tmp.resolve("out"), "models.policy.dtype=" + dtype), TrainerEndToEndTest.QUIET)) {
            assertMastersAre(masters, t.policiesForTest().get("policy"));
        }
        // another run naming the warm start (sft/models: its masters are beside it, in sft/master)
        try (Trainer t = Trainer.open(config(tmp.resolve("other"), "models.policy.dtype=" + dtype,
                "run.warm_start=" + WarmStart.weights(run)), TrainerEndToEndTest.QUIET)) {
            assertMastersAre(masters, t.policiesForTest().get("policy"));
            t.train();  // and RL trains from there
            assertEquals(1, t.step());
        }
    }

    @Test
    void aFloat32RunFromABfloat16WarmStartHasItsMastersExactlyNotTheirRounding() throws Exception {
        Path run = sft(config(tmp.resolve("out"), "models.policy.dtype=bfloat16"));
        Path masters = run.resolve("sft").resolve("master").resolve("policy");
        try (Trainer t = Trainer.open(config(tmp.resolve("other"), "models.policy.dtype=float32",
                "run.warm_start=" + WarmStart.weights(run)), TrainerEndToEndTest.QUIET);
             PointerScope scope = new PointerScope(); SafeTensors st = SafeTensors.open(masters)) {
            Policies.Policy p = t.policiesForTest().get("policy");
            assertEquals(ScalarType.Float, p.model().dtype());
            long between = 0;
            for (Map.Entry<String, Tensor> e : p.model().parameters().entrySet()) {
                float[] exact = Tensors.toFloats(st.get(e.getKey(), ScalarType.Float, cpu()));
                float[] rounded = Tensors.toFloats(st.get(e.getKey(), ScalarType.BFloat16, cpu()).to(ScalarType.Float));
                assertArrayEquals(exact, Tensors.toFloats(e.getValue()), "weight " + e.getKey() + " is the warm start's master");
                for (int i = 0; i < exact.length; i++) if (Float.floatToIntBits(exact[i]) != Float.floatToIntBits(rounded[i])) between++;
            }
            assertTrue(between > 0, "the masters hold values between bfloat16's");
            t.train();
            assertEquals(1, t.step());
        }
    }

    @Test
    void aBfloat16RunFromAFloat16WarmStartRoundsItsMastersOnceNotItsWeightsAgain() throws Exception {
        Path run = sft(config(tmp.resolve("out"), "models.policy.dtype=float16"));
        Path masters = run.resolve("sft").resolve("master").resolve("policy");
        try (Trainer t = Trainer.open(config(tmp.resolve("other"), "models.policy.dtype=bfloat16",
                "run.warm_start=" + WarmStart.weights(run)), TrainerEndToEndTest.QUIET);
             PointerScope scope = new PointerScope(); SafeTensors st = SafeTensors.open(masters)) {
            Policies.Policy p = t.policiesForTest().get("policy");
            assertMastersAre(masters, p);  // masters the files' values, weights their bfloat16 rounding
            // and that is not the float16 weights rounded again somewhere (else the test could not tell)
            long twice = 0;
            for (String name : p.model().parameters().keySet()) {
                float[] once = Tensors.toFloats(st.get(name, ScalarType.BFloat16, cpu()).to(ScalarType.Float));
                float[] again = Tensors.toFloats(st.get(name, ScalarType.Half, cpu()).to(ScalarType.BFloat16).to(ScalarType.Float));
                for (int i = 0; i < once.length; i++) if (Float.floatToIntBits(once[i]) != Float.floatToIntBits(again[i])) twice++;
            }
            assertTrue(twice > 0, "rounding twice differs from rounding once somewhere");
        }
    }

    @ParameterizedTest
    @ValueSource(booleans = {false, true})
    void theTrainerThatRanTheWarmStartGoesOnFromItsMastersNotTheirRounding(boolean sharded) throws Exception {
        // (sharded: the run's optimiser reads its own part of the warm start's unsharded masters)
        RunConfig cfg = config(tmp.resolve("out"), "models.policy.dtype=bfloat16", "run.resume=never",
                "distributed.shard_optimizer=" + sharded);
        try (Trainer t = Trainer.open(cfg, TrainerEndToEndTest.QUIET)) {
            t.sft();
            Path masters = cfg.run().runDir().resolve("sft").resolve("master").resolve("policy");
            assertMastersAre(masters, t.policiesForTest().get("policy"));
            t.train();
            assertEquals(1, t.step());
        }
    }

    @Test
    void aFloat32WarmStartWritesNoMastersAndOneWithoutThemStartsFromItsWeights() throws Exception {
        Path fp32 = sft(config(tmp.resolve("a"), "models.policy.dtype=float32"));
        assertFalse(Files.exists(fp32.resolve("sft").resolve("master")), "float32 weights are their own masters");
        // a bf16 warm start whose masters are gone (as one saved before they were): the masters are the weights
        Path bf16 = sft(config(tmp.resolve("b"), "models.policy.dtype=bfloat16"));
        Checkpoints.deleteTree(bf16.resolve("sft").resolve("master"));
        try (Trainer t = Trainer.open(config(tmp.resolve("b"), "models.policy.dtype=bfloat16"), TrainerEndToEndTest.QUIET);
             PointerScope scope = new PointerScope()) {
            Policies.Policy p = t.policiesForTest().get("policy");
            assertTrue(t.policiesForTest().keySet().contains("policy"));
            for (Map.Entry<String, Tensor> e : p.model().parameters().entrySet()) {
                assertArrayEquals(Tensors.toFloats(e.getValue().to(ScalarType.Float)), Tensors.toFloats(p.optim().masterWeights().get(e.getKey())),
                        "master " + e.getKey() + " is the weight");
            }
            t.train();
            assertEquals(1, t.step());
        }
    }

    @Test
    void mastersThatAreNotThoseOfTheWarmStartsWeightsAreRefusedNamingTheirFolder() throws Exception {
        Path run = sft(config(tmp.resolve("a"), "models.policy.dtype=bfloat16"));
        Path masters = run.resolve("sft").resolve("master").resolve("policy");
        // another warm start's masters (another seed): the right names and shapes, other values
        Path other = sft(config(tmp.resolve("b"), "models.policy.dtype=bfloat16", "run.seed=7"));
        Checkpoints.deleteTree(masters);
        CheckpointRetentionTest.copyTree(other.resolve("sft").resolve("master").resolve("policy"), masters);
        RuntimeException e = assertThrows(RuntimeException.class, () -> Trainer.open(config(tmp.resolve("a"),
                "models.policy.dtype=bfloat16"), TrainerEndToEndTest.QUIET).close());
        assertTrue(e.getMessage().contains(masters.toString()) && e.getMessage().contains("does not round to the weights"), e.getMessage());
        // a tensor missing
        String dropped;
        try (PointerScope scope = new PointerScope(); SafeTensors st = SafeTensors.open(WarmStart.weights(run).resolve("policy"))) {
            Map<String, Tensor> kept = new LinkedHashMap<>();
            for (String name : st.tensors().keySet()) kept.put(name, st.get(name, ScalarType.Float, cpu()));
            dropped = kept.keySet().iterator().next();
            kept.remove(dropped);
            Checkpoints.deleteTree(masters);
            SafeTensorsWriter.writeCheckpoint(masters, kept, CausalLm.DEFAULT_SHARD_BYTES);
        }
        e = assertThrows(RuntimeException.class, () -> Trainer.open(config(tmp.resolve("a"), "models.policy.dtype=bfloat16"),
                TrainerEndToEndTest.QUIET).close());
        assertTrue(e.getMessage().contains(masters.toString()) && e.getMessage().contains("no tensor " + dropped), e.getMessage());
    }

    /** The folders and files under {@code dir}, relative, sorted. */
    private static List<String> listing(Path dir) throws java.io.IOException {
        try (var s = Files.walk(dir)) {
            return s.map(p -> dir.relativize(p).toString()).sorted().toList();
        }
    }

    /** Rebuilds {@code sft} as a second warm start's save (WarmStart.save) left it when stopped: folder name -> contents. */
    private static void stateOf(Path sft, Map<String, Path> folders) throws Exception {
        Checkpoints.deleteTree(sft);
        Files.createDirectories(sft);
        for (Map.Entry<String, Path> e : folders.entrySet()) CheckpointRetentionTest.copyTree(e.getValue(), sft.resolve(e.getKey()));
    }

    @Test
    void aWarmStartStoppedAnywhereInItsSaveGivesWholeWeightsWithTheirOwnMasters() throws Exception {
        // warm start A in place, warm start B being saved over it: at every point where the save can stop, a run
        // from the folder has A's weights with A's masters or B's with B's, never one's weights with the other's
        // masters, and never the weights' rounding where the right masters are still on the disk
        Path runA = sft(config(tmp.resolve("a"), "models.policy.dtype=bfloat16"));
        Path runB = sft(config(tmp.resolve("b"), "models.policy.dtype=bfloat16", "run.seed=7"));
        Path a = tmp.resolve("pristine-a"), b = tmp.resolve("pristine-b");
        CheckpointRetentionTest.copyTree(runA.resolve("sft"), a);
        CheckpointRetentionTest.copyTree(runB.resolve("sft"), b);
        Path aw = a.resolve("models"), am = a.resolve("master"), bw = b.resolve("models"), bm = b.resolve("master");
        Path sft = runA.resolve("sft");
        record State(String name, Map<String, Path> folders, Path masters, String note) {}
        List<State> states = List.of(
                // B's weights and masters written and synced beside A's
                new State("before any rename", Map.of("models", aw, "master", am, "models.tmp", bw, "master.tmp", bm), am, null),
                // A's masters moved aside
                new State("A's masters aside", Map.of("models", aw, "master.old", am, "models.tmp", bw, "master.tmp", bm), am, "master.old"),
                // A's weights moved aside too (weights() moves them back)
                new State("A's weights aside", Map.of("models.old", aw, "master.old", am, "models.tmp", bw, "master.tmp", bm), am, "master.old"),
                // B's weights in place, its masters not yet
                new State("B's weights in", Map.of("models", bw, "models.old", aw, "master.old", am, "master.tmp", bm), bm, "master.tmp"),
                // B's masters in place, A's not yet deleted
                new State("B's masters in", Map.of("models", bw, "master", bm, "models.old", aw, "master.old", am), bm, null));
        for (State st : states) {
            stateOf(sft, st.folders());
            if (st.folders().containsKey("models")) {
                // another run from this folder (run.warm_start): the masters read where they are, the folder unchanged
                List<String> before = listing(sft);
                java.io.ByteArrayOutputStream log = new java.io.ByteArrayOutputStream();
                try (Trainer t = Trainer.open(config(tmp.resolve("other"), "models.policy.dtype=bfloat16", "run.warm_start=" + sft.resolve("models")),
                        new java.io.PrintStream(log, true))) {
                    assertMastersAre(st.masters().resolve("policy"), t.policiesForTest().get("policy"));
                } catch (AssertionError | RuntimeException e) {
                    throw new AssertionError(st.name() + ", from another run: " + e.getMessage(), e);
                }
                String out = log.toString();
                if (st.note() == null) assertFalse(out.contains("interrupted `drmas sft`"), st.name() + ": " + out);
                else assertTrue(out.contains(" but in " + sft.resolve(st.note()).resolve("policy") + ", where an interrupted `drmas sft` left them"),
                        st.name() + ": " + out);
                assertEquals(before, listing(sft), st.name() + ": another run's warm start is not changed");
            }
            // the run itself: its sft/ repaired (WarmStart.weights), the masters in place
            java.io.ByteArrayOutputStream log = new java.io.ByteArrayOutputStream();
            try (Trainer t = Trainer.open(config(tmp.resolve("a"), "models.policy.dtype=bfloat16"), new java.io.PrintStream(log, true))) {
                assertMastersAre(st.masters().resolve("policy"), t.policiesForTest().get("policy"));
            } catch (AssertionError | RuntimeException e) {
                throw new AssertionError(st.name() + ": " + e.getMessage(), e);
            }
            assertFalse(log.toString().contains("interrupted `drmas sft`"), st.name() + ": " + log);
            assertTrue(Files.isDirectory(sft.resolve("master").resolve("policy")), st.name() + ": " + listing(sft));
            if (st.note() != null) assertFalse(Files.exists(sft.resolve(st.note())), st.name() + ": moved in place: " + listing(sft));
        }
        // masters aside that are not those of the weights (A's weights, only B's masters aside): the weights' rounding, and a
        // warning where they would have mattered; a float32 run would have taken them exactly, a pure bfloat16 one not
        stateOf(sft, Map.of("models", aw, "master.tmp", bm));
        for (String[] c : new String[][] {{"models.policy.master_dtype=float32", "models.policy.dtype=bfloat16"},
                {"models.policy.dtype=float32", "models.policy.dtype=float32"},
                {"models.policy.master_dtype=bfloat16", "models.policy.dtype=bfloat16"}}) {
            java.io.ByteArrayOutputStream log = new java.io.ByteArrayOutputStream();
            boolean warns = !c[0].endsWith("master_dtype=bfloat16");
            try (Trainer t = Trainer.open(config(tmp.resolve("a"), c[1], c[0]), new java.io.PrintStream(log, true));
                 PointerScope scope = new PointerScope(); SafeTensors w = SafeTensors.open(aw.resolve("policy"))) {
                for (Map.Entry<String, Tensor> e : t.policiesForTest().get("policy").model().parameters().entrySet()) {
                    assertArrayEquals(Tensors.toFloats(w.get(e.getKey(), ScalarType.Float, cpu())), Tensors.toFloats(e.getValue().to(ScalarType.Float)),
                            c[0] + ": weight " + e.getKey() + " is the file's");
                }
            }
            String out = log.toString();
            assertEquals(warns, out.contains(sft.resolve("master.tmp").resolve("policy") + ", where an interrupted `drmas sft` left masters, "
                    + "does not hold those of its weights"), c[0] + ": " + out);
        }
        // float32 weights (a float32 warm start stopped over a bfloat16 one, whose masters stayed aside) are as exact as
        // masters: nothing to warn of, and a mixed-precision run's masters start from those files
        Path runC = sft(config(tmp.resolve("c"), "models.policy.dtype=float32"));
        stateOf(sft, Map.of("models", runC.resolve("sft").resolve("models"), "master.old", am));
        java.io.ByteArrayOutputStream quiet = new java.io.ByteArrayOutputStream();
        try (Trainer t = Trainer.open(config(tmp.resolve("a"), "models.policy.dtype=bfloat16"), new java.io.PrintStream(quiet, true))) {
            assertMastersAre(runC.resolve("sft").resolve("models").resolve("policy"), t.policiesForTest().get("policy"));
        }
        assertFalse(quiet.toString().contains("interrupted `drmas sft`"), quiet.toString());
        // a masters folder cut short (a write stopped midway): not those of the weights either
        stateOf(sft, Map.of("models", aw, "master.old", am));
        try (var files = Files.list(sft.resolve("master.old").resolve("policy"))) {
            Path f = files.filter(x -> x.toString().endsWith(".safetensors")).findFirst().orElseThrow();
            try (var ch = java.nio.channels.FileChannel.open(f, java.nio.file.StandardOpenOption.WRITE)) {
                ch.truncate(ch.size() / 2);
            }
        }
        java.io.ByteArrayOutputStream log = new java.io.ByteArrayOutputStream();
        try (Trainer t = Trainer.open(config(tmp.resolve("a"), "models.policy.dtype=bfloat16"), new java.io.PrintStream(log, true))) {
            assertNotNull(t.policiesForTest().get("policy"));
        }
        assertTrue(log.toString().contains("does not hold those of its weights"), log.toString());
    }
}
