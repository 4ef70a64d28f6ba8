// CheckpointFaultsTest.java — what a run does when its files fail (issue 20: case 5, case 6 and the
// checkpoint list), in child JVMs with a real file size limit (bash's ulimit -f: every write past
// it fails with EFBIG, as on a full disk): a checkpoint that cannot be written is an error naming
// it and leaves no temporary folder; a warm start that cannot be written keeps the previous one
// whole (it used to delete it); metrics that cannot be appended stop the run, the last checkpoint
// kept; a resume with a changed model shape, seed or training data is refused naming the keys, a
// safe change is logged; weights with NaN are refused on load naming the tensor; a model whose
// logits are not finite makes generate fail instead of printing empty text; --max-new-tokens past
// the model's positions is clamped with a warning; and (with strace) every checkpoint file, and
// every folder created to hold them, is synced before the rename, and so are the metrics files'
// lines up to the checkpoint's step; a run whose KL reference is lost evaluates but does not train.
package dev.drmas.cli;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.drmas.model.CausalLm;
import dev.drmas.model.Family;
import dev.drmas.model.ModelConfig;
import dev.drmas.tokenizer.BuiltinTokenizer;
import dev.drmas.tokenizer.HfTokenizer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.NoGradGuard;
import org.bytedeco.pytorch.Scalar;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

class CheckpointFaultsTest {
    @TempDir
    Path dir;

    // the model's safetensors file is ~85 KB; every other file the run writes stays far below 60 KB
    static final String LIMIT = "ulimit -f 60;";

    Path config() throws Exception {
        Path p = dir.resolve("run.yaml");
        if (!Files.exists(p)) Files.writeString(p, RunFolderTest.YAML.replace("name: lock", "name: faults"));
        return p;
    }

    Path run() {
        return dir.resolve("runs/faults");
    }

    String[] args(String command, String... overrides) throws Exception {
        List<String> a = new ArrayList<>(List.of(command, config().toString(), "run.output_dir=" + dir.resolve("runs")));
        a.addAll(List.of(overrides));
        return a.toArray(String[]::new);
    }

    List<String> names(Path folder) throws Exception {
        if (!Files.isDirectory(folder)) return List.of();
        try (Stream<Path> s = Files.list(folder)) {
            return s.map(p -> p.getFileName().toString()).sorted().toList();
        }
    }

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void aCheckpointThatCannotBeWrittenIsNamedAndLeavesNoTemporaryFolder() throws Exception {
        Child.Result r = Child.shell(dir, LIMIT, "", 100, args("train", "trainer.steps=1"));
        assertEquals(3, r.exit(), r.out() + r.err());
        assertTrue(r.err().contains("cannot write the checkpoint of step 1 (in " + run().resolve("checkpoints/step_000001.tmp")
                + "; removed): File too large"), r.err());
        assertEquals(List.of(), names(run().resolve("checkpoints")), "neither a checkpoint nor its temporary folder");
    }

    @Test
    @Timeout(value = 180, unit = TimeUnit.SECONDS)
    void aWarmStartThatCannotBeWrittenKeepsThePreviousOne() throws Exception {
        Cli.Run first = Cli.run(args("sft"));
        assertEquals(0, first.exit(), first.err());
        Path weights = run().resolve("sft/models/policy/model.safetensors");
        byte[] before = Files.readAllBytes(weights);

        // a second warm start on from the first (run.warm_start names it: without, drmas sft refuses a folder that has one)
        Child.Result second = Child.shell(dir, LIMIT, "", 100, args("sft", "sft.steps=2", "run.warm_start=" + run().resolve("sft/models")));
        assertNotEquals(0, second.exit(), second.err());
        assertTrue(second.err().contains("cannot write the warm-start weights"), second.err());
        assertArrayEquals(before, Files.readAllBytes(weights), "the previous warm start must stay whole");
        assertEquals(List.of("models"), names(run().resolve("sft")), "no temporary folder left");

        Cli.Run train = Cli.run(args("train", "trainer.steps=1"));
        assertEquals(0, train.exit(), train.err());
    }

    @Test
    void anInterruptedWarmStartSwapIsRepaired() throws Exception {
        Cli.Run first = Cli.run(args("sft"));
        assertEquals(0, first.exit(), first.err());
        Path sft = run().resolve("sft");
        // what a kill between the swap's two renames leaves: the old weights moved aside, the new ones not in place
        Files.move(sft.resolve("models"), sft.resolve("models.old"));
        Files.createDirectories(sft.resolve("models.tmp/policy"));
        Files.writeString(sft.resolve("models.tmp/policy/model.safetensors"), "half");
        Cli.Run train = Cli.run(args("train", "trainer.steps=1"));
        assertEquals(0, train.exit(), train.err());
        assertTrue(Files.isRegularFile(sft.resolve("models/policy/model.safetensors")));
    }

    @Test
    @Timeout(value = 180, unit = TimeUnit.SECONDS)
    void metricsThatCannotBeWrittenStopTheRunAndKeepTheCheckpoint() throws Exception {
        Cli.Run two = Cli.run(args("train", "trainer.steps=2"));
        assertEquals(0, two.exit(), two.err());
        // bring metrics.jsonl near the limit with a valid line of step 1, which a resume from step 2 keeps
        Path metrics = run().resolve("metrics.jsonl");
        String pad = "{\"step\": 1, \"pad\": \"" + "x".repeat((int) (59 * 1024 - Files.size(metrics))) + "\"}\n";
        Files.writeString(metrics, pad, java.nio.file.StandardOpenOption.APPEND);
        Child.Result r = Child.shell(dir, LIMIT, "", 100, args("train", "trainer.steps=4", "trainer.save_freq=0"));
        assertNotEquals(0, r.exit(), r.out() + r.err());
        assertTrue(r.err().contains("metrics: JsonlSink failed at step 3: cannot append to " + metrics), r.err());
        assertTrue(r.err().contains("the run stops"), r.err());
        assertEquals(List.of("step_000001", "step_000002"), names(run().resolve("checkpoints")));
    }

    @Test
    void aResumeWithAnotherModelShapeIsRefusedAndSafeChangesAreLogged() throws Exception {
        Cli.Run one = Cli.run(args("train", "trainer.steps=1"));
        assertEquals(0, one.exit(), one.err());
        Cli.Run wider = Cli.run(args("train", "trainer.steps=2", "models.policy.size.hidden=48"));
        RunFolderTest.fails(wider, "run.resume: the checkpoint " + run().resolve("checkpoints/step_000001"),
                "models.policy.size.hidden: 32 at the checkpoint, 48 now");
        // another workflow, and with it another team (proposer-aggregator's default agents)
        Cli.Run team = Cli.run(args("train", "trainer.steps=2", "orchestra.name=proposer-aggregator"));
        RunFolderTest.fails(team, "orchestra.name: math at the checkpoint, proposer-aggregator now", "agents[0].id: solver at the checkpoint");
        // the saved data position counts tasks in the order the seed shuffled the training data into
        RunFolderTest.fails(Cli.run(args("train", "trainer.steps=2", "run.seed=4")), "run.seed: 3 at the checkpoint, 4 now");
        RunFolderTest.fails(Cli.run(args("train", "trainer.steps=2", "data.synthetic.train_size=41")),
                "data.synthetic.train_size: 40 at the checkpoint, 41 now");
        // which only training needs: an evaluation of the checkpoint may use another seed and data
        Cli.Run eval = Cli.run(args("eval", "run.seed=4", "data.synthetic.train_size=41"));
        assertEquals(0, eval.exit(), eval.err());

        var saved = System.out;
        var captured = new java.io.ByteArrayOutputStream();
        System.setOut(new java.io.PrintStream(captured, true, java.nio.charset.StandardCharsets.UTF_8));
        Cli.Run longer;
        try {
            // the update's batching may change too (a checkpoint holds no trace of it)
            longer = Cli.run(args("train", "trainer.steps=2", "ppo.updates_per_step=2"));
        } finally {
            System.setOut(saved);
        }
        assertEquals(0, longer.exit(), longer.err());
        assertTrue(captured.toString().contains("drmas: resuming with changed settings: ppo.updates_per_step: 0 -> 2; trainer.steps: 1 -> 2"),
                captured.toString());
    }

    @Test
    void aRunWhoseKlReferenceIsLostStillEvaluatesButDoesNotTrain() throws Exception {
        Cli.Run one = Cli.run(args("train", "trainer.steps=1", "ppo.reference_model=true"));
        assertEquals(0, one.exit(), one.err());
        Path reference = run().resolve("reference/policy");
        assertTrue(Files.isRegularFile(reference.resolve("model.safetensors")), "the first checkpoint writes the reference");
        dev.drmas.train.Checkpoints.deleteTree(reference.getParent());
        // evaluation never uses the reference: it warns and evaluates the checkpoint
        var saved = System.out;
        var captured = new java.io.ByteArrayOutputStream();
        System.setOut(new java.io.PrintStream(captured, true, java.nio.charset.StandardCharsets.UTF_8));
        Cli.Run eval;
        try {
            eval = Cli.run(args("eval", "ppo.reference_model=true"));
        } finally {
            System.setOut(saved);
        }
        assertEquals(0, eval.exit(), eval.err());
        String missing = "ppo.reference_model: the KL reference of model 'policy' is missing (no " + reference + ")";
        assertTrue(captured.toString().contains("drmas: warning: " + missing), captured.toString());
        assertTrue(captured.toString().contains("step 1\n") && captured.toString().contains("eval/pass@1"), captured.toString());
        // training would pull toward no reference, or a made-up one: it stops, and writes none
        RunFolderTest.fails(Cli.run(args("train", "trainer.steps=2", "ppo.reference_model=true")), missing,
                "Restore the folder, turn ppo.reference_model off");
        assertFalse(Files.exists(reference.getParent()));
        assertEquals(List.of("step_000001"), names(run().resolve("checkpoints")));
    }

    /** A tiny model with the built-in tokenizer in {@code d}, its weights changed by {@code edit}. */
    static void model(Path d, java.util.function.Consumer<CausalLm> edit) throws Exception {
        BuiltinTokenizer.writeTo(d);
        int vocab;
        try (HfTokenizer tok = HfTokenizer.load(d)) {
            vocab = tok.vocabSize();
        }
        try (CausalLm m = CausalLm.random(ModelConfig.tiny(Family.QWEN3, vocab), 5)) {
            try (PointerScope scope = new PointerScope(); NoGradGuard ng = new NoGradGuard()) {
                edit.accept(m);
            }
            m.save(d);
        }
    }

    @Test
    void nonFiniteWeightsAreRefusedOnLoadByName() throws Exception {
        Path d = dir.resolve("nan-model");
        model(d, m -> m.parameters().get("model.norm.weight").narrow(0, 3, 2).fill_(new Scalar(Double.NaN)));
        Cli.Run r = Cli.run("generate", "--model", d.toString(), "--prompt", "1+2=");
        assertEquals(1, r.exit(), r.err());
        assertTrue(r.err().contains("weights that are NaN or infinite; tensors (1): model.norm.weight (2 of 64 values, in model.safetensors)"),
                r.err());
    }

    @Test
    void nonFiniteLogitsAreAnErrorNotEmptyText() throws Exception {
        Path d = dir.resolve("huge-model");
        // finite weights (3e38 < float32's max) whose products overflow: every logit is infinite
        model(d, m -> m.parameters().get("lm_head.weight").fill_(new Scalar(3e38)));
        Cli.Run r = Cli.run("generate", "--model", d.toString(), "--prompt", "1+2=");
        assertEquals(1, r.exit(), r.out() + r.err());
        assertTrue(r.err().contains("the model produced non-finite logits (NaN or infinity) for request 0 at generated token 0"), r.err());
    }

    @Test
    void aBudgetPastTheModelsPositionsIsClamped() throws Exception {
        Path d = dir.resolve("model");
        model(d, m -> { });
        Cli.Run r = Cli.run("generate", "--model", d.toString(), "--prompt", "1+2=", "--max-new-tokens", "1000", "--json");
        assertEquals(0, r.exit(), r.err());
        assertTrue(r.err().contains("--max-new-tokens 1000 goes past the model's 256 positions"), r.err());
        var o = new com.fasterxml.jackson.databind.ObjectMapper().readTree(r.out());
        assertTrue(o.get("prompt_ids").size() + o.get("ids").size() <= 256, r.out());
        Cli.Run lots = Cli.run("generate", "--model", d.toString(), "--prompt", "1+2=", "--max-new-tokens", "100000000");
        assertEquals(0, lots.exit(), lots.err());  // it ended in a LibTorch allocation failure
        assertTrue(lots.err().contains("generating at most"), lots.err());
        Cli.Run huge = Cli.run("generate", "--model", d.toString(), "--prompt", "x".repeat(300));
        assertEquals(1, huge.exit(), huge.err());
        assertTrue(huge.err().contains("takes at most 256 positions"), huge.err());
    }

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void checkpointFilesAreSyncedBeforeTheRename() throws Exception {
        assumeTrue(Files.isExecutable(Path.of("/usr/bin/strace")), "strace is not installed; skipped");
        Path trace = dir.resolve("trace.txt");
        List<String> cmd = new ArrayList<>(List.of("/usr/bin/strace", "-f", "-qq", "--seccomp-bpf", "-o", trace.toString(),
                "-e", "trace=fsync,fdatasync,rename,renameat,renameat2,openat", "-e", "signal=none"));
        cmd.addAll(Child.command(args("train", "trainer.steps=1")));
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes());
        assertTrue(p.waitFor(110, TimeUnit.SECONDS));
        assumeTrue(p.exitValue() == 0 || !out.contains("ptrace") && !out.contains("seccomp"), "strace cannot trace here (" + out + "); skipped");
        assertEquals(0, p.exitValue(), out);
        List<String> lines = Files.readAllLines(trace);
        int rename = -1;
        for (int i = 0; i < lines.size(); i++) if (lines.get(i).contains("step_000001.tmp\"") && lines.get(i).contains("rename")) rename = i;
        assertTrue(rename > 0, "no rename of step_000001.tmp in the trace");
        // every file of the checkpoint was opened and fsync'ed before the rename
        for (String f : List.of("models/policy/model.safetensors", "optim/policy.safetensors", "trainer_state.json", "models/policy/tokenizer.json")) {
            assertTrue(syncedBefore(lines, "step_000001.tmp/" + f + "\"", rename), f + " was not synced before the rename");
        }
        // and the folders that the run created to hold it: checkpoints/ in the run folder, the run folder in runs/
        for (Path folder : List.of(run(), dir.resolve("runs"))) {
            assertTrue(syncedBefore(lines, "\"" + folder + "\"", rename), folder + " (a new entry in it) was not synced before the rename");
        }
    }

    @Test
    @Timeout(value = 180, unit = TimeUnit.SECONDS)
    void metricsUpToACheckpointAreSyncedBeforeItsRename() throws Exception {
        assumeTrue(Files.isExecutable(Path.of("/usr/bin/strace")), "strace is not installed; skipped");
        Cli.Run one = Cli.run(args("train", "trainer.steps=1", "metrics.tensorboard=true"));
        assertEquals(0, one.exit(), one.err());
        Path metrics = run().resolve("metrics.jsonl");
        // a line the crashed run logged past its last checkpoint: the resume rewrites the file without it
        Files.writeString(metrics, "{\"step\":2,\"crashed\":1.0}\n", java.nio.file.StandardOpenOption.APPEND);
        Path trace = dir.resolve("trace.txt");
        List<String> cmd = new ArrayList<>(List.of("/usr/bin/strace", "-f", "-qq", "--seccomp-bpf", "-o", trace.toString(),
                "-e", "trace=fsync,fdatasync,rename,renameat,renameat2,openat,close,write", "-e", "signal=none"));
        cmd.addAll(Child.command(args("train", "trainer.steps=2", "metrics.tensorboard=true")));
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes());
        assertTrue(p.waitFor(170, TimeUnit.SECONDS));
        assumeTrue(p.exitValue() == 0 || !out.contains("ptrace") && !out.contains("seccomp"), "strace cannot trace here (" + out + "); skipped");
        assertEquals(0, p.exitValue(), out);
        List<String> lines = Files.readAllLines(trace);
        int checkpoint = lastRename(lines, "step_000002.tmp\""), rewrite = lastRename(lines, "metrics.jsonl.tmp\"");
        assertTrue(checkpoint > 0 && rewrite > 0 && rewrite < checkpoint, "renames of metrics.jsonl.tmp and step_000002.tmp: " + rewrite
                + ", " + checkpoint);
        // the rewritten file was on the disk before its name replaced the old one, and the new name after
        assertTrue(syncedBefore(lines, "metrics.jsonl.tmp\"", rewrite), "metrics.jsonl.tmp was not synced before its rename");
        assertTrue(folderSyncedBetween(lines, run(), rewrite, checkpoint), "the run folder was not synced after the rename of metrics.jsonl");
        // every line of step 2 (train and eval) is on the disk before the checkpoint of step 2 is
        assertTrue(syncedAfterLastWrite(lines, "metrics.jsonl\"", "{\\\"step\\\":2,", checkpoint), "metrics.jsonl: its lines of step 2 "
                + "were not synced before the checkpoint's rename");
        assertTrue(syncedAfterLastWrite(lines, "tensorboard/events.out.tfevents.", null, checkpoint),
                "the TensorBoard event file was not synced before the checkpoint's rename");
        assertTrue(folderSyncedBetween(lines, run().resolve("tensorboard"), 0, checkpoint), "tensorboard/ (its new event file) not synced");
        List<String> steps = Files.readAllLines(metrics).stream().map(l -> l.substring(0, l.indexOf(','))).toList();
        assertEquals(List.of("{\"step\":1", "{\"step\":2"), steps, "one line per step, the crashed run's gone");
    }

    /** The trace line of the last rename whose arguments contain {@code quoted}; -1 if none. */
    private static int lastRename(List<String> lines, String quoted) {
        int at = -1;
        for (int i = 0; i < lines.size(); i++) if (lines.get(i).contains("rename") && lines.get(i).contains(quoted)) at = i;
        return at;
    }

    /** The descriptor an openat at trace line {@code i} returned (its "resumed" line if it was interrupted). */
    private static String openedFd(List<String> lines, int i) {
        String l = lines.get(i), tid = l.substring(0, l.indexOf(' '));
        for (int j = i + 1; l.contains("<unfinished") && j < lines.size(); j++) {
            if (lines.get(j).startsWith(tid + " <... openat resumed>")) l = lines.get(j);
        }
        return l.substring(l.lastIndexOf('=') + 1).trim();
    }

    /** Whether {@code folder} was opened and fsync'ed (any thread: descriptors are the process's) between trace lines from and to. */
    private static boolean folderSyncedBetween(List<String> lines, Path folder, int from, int to) {
        for (int i = from; i < to; i++) {
            if (!lines.get(i).contains("openat") || !lines.get(i).contains("\"" + folder + "\"")) continue;
            String fd = openedFd(lines, i);
            for (int j = i + 1; j < to; j++) {
                String m = lines.get(j);
                if (call(m, "close", fd)) break;
                if (call(m, "fsync", fd) || call(m, "fdatasync", fd)) return true;
            }
        }
        return false;
    }

    /**
     * Whether the file last opened before trace line {@code end} under a path containing {@code quoted}
     * was fsync'ed on that descriptor, before {@code end} and after its last write there (which begins
     * with {@code written}, as strace prints it, unless null), with the descriptor still open.
     */
    private static boolean syncedAfterLastWrite(List<String> lines, String quoted, String written, int end) {
        int open = -1;
        for (int i = 0; i < end; i++) if (lines.get(i).contains("openat") && lines.get(i).contains(quoted)) open = i;
        if (open < 0) return false;
        String fd = openedFd(lines, open);
        boolean wrote = false, synced = false;
        for (int j = open + 1; j < end; j++) {
            String m = lines.get(j);
            if (call(m, "close", fd)) return false;
            if (m.contains(" write(" + fd + ", ")) {
                wrote = written == null || m.contains(" write(" + fd + ", \"" + written);
                synced = false;
            }
            if (call(m, "fsync", fd) || call(m, "fdatasync", fd)) synced = true;
        }
        return wrote && synced;
    }

    /** Whether trace line {@code m} is a call of {@code name} on descriptor {@code fd}, finished or not. */
    private static boolean call(String m, String name, String fd) {
        return m.contains(" " + name + "(" + fd + ")") || m.contains(" " + name + "(" + fd + " <unfinished");
    }

    /** Whether the trace has an openat of a path ending in {@code quoted} whose descriptor was fsync'ed before line {@code end}. */
    private static boolean syncedBefore(List<String> lines, String quoted, int end) {
        for (int i = 0; i < end; i++) {
            String l = lines.get(i);
            if (!l.contains(quoted) || !l.contains("openat")) continue;
            String pid = l.substring(0, l.indexOf(' '));
            String done = l;
            for (int j = i + 1; done.contains("<unfinished") && j < lines.size(); j++) {
                if (lines.get(j).startsWith(pid + " <... openat resumed>")) done = lines.get(j);
            }
            String fd = done.substring(done.lastIndexOf('=') + 1).trim();
            for (int j = i + 1; j < end; j++) {
                String m = lines.get(j);
                if (m.startsWith(pid + " ") && (m.contains("fsync(" + fd + ")") || m.contains("fdatasync(" + fd + ")"))) return true;
            }
        }
        return false;
    }
}
