// MemoryPlanCheckTest.java — `drmas plan` against measurement: for five toy configs on the CPU
// (float32, the default fused LM head; Qwen3 shared by two agents, Qwen2 with biases, an untied
// head, temperature and entropy bonus, two Llama models with reference models, Qwen3 at a
// 30,000-id vocabulary and temperature, and opt-in its materialised twin; a deep bfloat16 Qwen3 on
// short rows, whose update peaks in the optimiser step), the bytes the plan predicts for the update phase,
// the step's peak — what the phase adds on top of what is resident before it — must be within 15% (or the JVM's own 8 MiB of slack, where that is more)
// of what the trainer measures (memory/peak_update_bytes: the high-water mark over the phase's
// start); generation's prediction and measurement (memory/peak_rollout_bytes) are printed.
// The measure is the exact heap count of libdrmas_memcount.so, which the pom preloads for this
// module's tests (asserted), and each config runs in a JVM of its own: the kernel's resident size,
// in one JVM after the other configs, read up to 1/4 low on a CI machine (the plan 1.30x it) while
// it matched here. The shapes make the tensors dominate the
// process's other allocations (hidden 256-384, 3-4 layers, 512-token rows: 170-330 MiB an update).
// Eight rollouts (two tasks of four): the update's peak is one micro-batch's (four rows), so sixteen
// read the same within 2.3 MiB in twice the time (the update is the test's cost). Measured at the
// second step (the 16-layer config: the median of steps 2-4): the first allocates the gradients,
// which stay, and warms the allocator. The plan is
// a worst case, so each config's seed is one whose rollouts reach the longest row (asserted).
// Figures: bench/README.md, "drmas plan".
package dev.drmas.train;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import dev.drmas.cli.ChildJvm;
import dev.drmas.config.RunConfig;
import dev.drmas.metrics.PeakMemory;
import dev.drmas.model.ModelConfig;
import dev.drmas.tokenizer.BuiltinTokenizer;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.condition.EnabledIfSystemProperty;
import org.junit.jupiter.api.io.TempDir;

class MemoryPlanCheckTest {
    @TempDir
    Path tmp;

    static final double TOLERANCE = 0.15;
    static final PrintStream QUIET = new PrintStream(new ByteArrayOutputStream());

    @BeforeAll
    static void exactCounter() {
        assertEquals(PeakMemory.Source.HEAP, PeakMemory.source(), "the heap counter is not preloaded: run with"
                + " LD_PRELOAD=bindings/target/classes/native/linux-x86_64/libdrmas_memcount.so, as the pom does");
    }

    static final String BASE = """
            run: {name: check, seed: 3, threads: 2, device: cpu, resume: never}
            data:
              synthetic: {operands: 2, digits: 1, operators: ["+"], train_size: 40, test_size: 4}
            models:
              policy:
                family: qwen3
                size: {hidden: 256, layers: 4, heads: 4, kv_heads: 2, intermediate: 768, max_positions: 512}
                optim: {lr: 1.0e-4, weight_decay: 0.0, grad_clip: 1.0}
            orchestra: {name: math, options: {max_loops: 1}}
            rollout: {tasks_per_step: 2, rollouts_per_task: 4, temperature: 1.0, max_new_tokens: 448, max_prompt_tokens: 64}
            algorithm: {mode: drmas}
            ppo: {epochs: 1, mini_batch_size: 8, micro_batch_size: 4}
            trainer: {steps: 2, eval_freq: 0, save_freq: 0}
            metrics: {jsonl: false, tensorboard: false, progress_bar: false}
            """;

    record Measured(double rollout, double update, int longestRow) {
    }

    /**
     * Two steps of the config in a JVM of its own, as a run has: a process that already ran
     * LibTorch (another config of this class) reads the phases differently — its one-time
     * allocations are made and some of them are let go of later (with the Llama config first the
     * Qwen3 update read 202 instead of 235 MiB, its generation 94 instead of 71). The JVM gets
     * this one's class path, native-access, -Ddrmas.* and -Dorg.bytedeco.* flags and environment (the
     * preload).
     */
    Measured measure(RunConfig cfg, String name) {
        try {
            Path yaml = tmp.resolve(name + ".yaml");
            Files.writeString(yaml, cfg.toYaml());
            List<String> cmd = ChildJvm.command(a -> a.startsWith("--enable-native-access") || a.startsWith("-Dorg.bytedeco.")
                    || a.startsWith("-Ddrmas."));
            cmd.addAll(List.of("-Xmx2g",
                    // the JVM's own mallocs are in the count too: the serial collector and C1 alone make
                    // fewer and steadier ones than G1's remembered sets and C2's arenas (qwen3's update
                    // read 226.7-237.9 MiB over three runs with the defaults, 238.2-238.7 with these)
                    "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", MemoryPlanCheckTest.class.getName(), yaml.toString()));
            Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
            String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            assertTrue(p.waitFor(10, TimeUnit.MINUTES), name + ": the measuring JVM did not end");
            assertEquals(0, p.exitValue(), name + ": the measuring JVM failed:\n" + out);
            String line = out.lines().filter(l -> l.startsWith("MEASURED ")).findFirst()
                    .orElseThrow(() -> new AssertionError(name + ": no MEASURED line from the measuring JVM:\n" + out));
            String[] f = line.split(" ");
            assertEquals(PeakMemory.Source.HEAP.name(), f[1], name + ": the measuring JVM's memory figures are not the heap counter's");
            return new Measured(Double.parseDouble(f[2]), Double.parseDouble(f[3]), Integer.parseInt(f[4]));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new AssertionError(e);
        }
    }

    /**
     * The measuring JVM: the config file's trainer.steps steps (at least two); prints MEASURED source
     * rollout update longest-row, the phases' peaks the median over the steps after the first (its
     * one-time allocations) and the longest row of those steps.
     */
    public static void main(String[] args) throws IOException {
        RunConfig cfg = RunConfig.parse(Files.readString(Path.of(args[0])), List.of());
        try (Trainer t = Trainer.open(cfg, QUIET)) {
            t.trainStep();
            List<Double> rollout = new ArrayList<>(), update = new ArrayList<>();
            int longest = 0;
            for (int s = 1; s < Math.max(2, cfg.trainer().steps()); s++) {
                Map<String, Double> m = t.trainStep();
                rollout.add(m.get("memory/peak_rollout_bytes"));
                update.add(m.get("memory/peak_update_bytes"));
                for (int i = 0; i < t.lastStep.batch().rows(); i++) {
                    var turn = t.lastStep.batch().turn(i);
                    longest = Math.max(longest, turn.promptIds().length + turn.responseIds().length);
                }
            }
            System.out.println("MEASURED " + PeakMemory.source() + " " + median(rollout) + " " + median(update) + " " + longest);
        }
    }

    /** The middle value (the lower of the two middle ones for an even count). */
    static double median(List<Double> xs) {
        List<Double> sorted = new ArrayList<>(xs);
        sorted.sort(null);
        return sorted.get((sorted.size() - 1) / 2);
    }

    /** Each model's shape as the trainer builds it (and drmas plan reads it): its folder's config.json, else its size at the built-in vocabulary. */
    static Map<String, ModelConfig> shapes(RunConfig cfg) {
        Map<String, ModelConfig> s = new LinkedHashMap<>();
        for (String id : cfg.usedModels()) {
            var spec = cfg.models().get(id);
            s.put(id, spec.path() != null ? ModelConfig.read(spec.path().resolve("config.json"))
                    : spec.toModelConfig(BuiltinTokenizer.VOCAB_SIZE, List.of()));
        }
        return s;
    }

    /**
     * A tokenizer folder of {@code vocab} ids: the built-in tokenizer's, then ids that encoding never
     * makes (no merges reach them) but a random model samples and decoding prints ("w366", …): a toy
     * model at a vocabulary where the LM head matters. Its config.json is BASE's policy at that
     * vocabulary: init: random builds the folder's shape.
     */
    static Path bigVocabulary(Path dir, int vocab) throws IOException {
        BuiltinTokenizer.writeTo(dir);
        RunConfig.parse(BASE, List.of()).models().get("policy").toModelConfig(vocab, List.of()).write(dir.resolve("config.json"));
        ObjectMapper json = new ObjectMapper();
        Path file = dir.resolve("tokenizer.json");
        @SuppressWarnings("unchecked")
        Map<String, Object> tok = json.readValue(file.toFile(), Map.class);
        @SuppressWarnings("unchecked")
        Map<String, Object> ids = (Map<String, Object>) ((Map<String, Object>) tok.get("model")).get("vocab");
        for (int id = BuiltinTokenizer.VOCAB_SIZE; id < vocab; id++) ids.put("w" + id, id);
        json.writeValue(file.toFile(), tok);
        return dir;
    }

    void check(String name, String... overrides) {
        checkYaml(name, BASE, overrides);
    }

    void checkYaml(String name, String yaml, String... overrides) {
        List<String> o = new ArrayList<>(List.of("run.output_dir=" + tmp, "run.name=" + name));
        o.addAll(List.of(overrides));
        RunConfig cfg = RunConfig.parse(yaml, o);
        MemoryPlan plan = MemoryPlan.of(cfg, shapes(cfg), new MemoryPlan.Machine(1, 1L << 40));
        Measured got = measure(cfg, name);
        long predUpdate = plan.phases().get(2).added(), predGen = plan.phases().get(0).added();
        System.out.printf(Locale.ROOT, "plan check %s: update predicted %.1f MiB measured %.1f MiB (%.3f); generation predicted %.1f MiB"
                        + " measured %.1f MiB (%.3f); longest row %d%n", name, predUpdate / 1048576.0, got.update() / 1048576.0,
                predUpdate / got.update(), predGen / 1048576.0, got.rollout() / 1048576.0, predGen / got.rollout(), got.longestRow());
        // the plan is a worst case: it is only comparable when the step's longest row came near the longest possible
        int row = cfg.rollout().maxPromptTokens() + cfg.rollout().maxNewTokens();
        assertTrue(got.longestRow() >= 0.95 * row, name + ": the longest row (" + got.longestRow() + " tokens) is far from the"
                + " plan's worst case (" + row + "): pick a seed whose rollouts reach it");
        // Within 15%, or within the JVM's own native allocations (its compiler's arenas, which come and
        // go during a phase and move its reading either way) where 15% is less than those: only the
        // 16-layer config's ~20 MiB update is that small (it read 20.2 and 12.4 MiB in two runs of
        // the same code), and a copy of its model (241.8 MiB once) is still far outside.
        double allowed = Math.max(TOLERANCE * got.update(), dev.drmas.testing.HeapCounter.JVM_SLACK);
        assertTrue(Math.abs(predUpdate - got.update()) <= allowed, String.format(Locale.ROOT,
                "%s: update phase predicted %d bytes, measured %.0f (ratio %.3f)", name, predUpdate, got.update(), predUpdate / got.update()));
        // The update is the step's peak: the 15% holds it. Generation, since each layer of a
        // forward frees its own tensors, adds only ~50-130 MiB here, and its reading moved by up to
        // ~50 MiB between runs of the same config (0.51-1.09 of the prediction): it is printed above,
        // not asserted; only that the plan ranks it below the update.
        assertTrue(predGen < predUpdate, name + ": the update is the step's peak in the plan");
    }

    @Test
    void qwen3Shared() {
        check("qwen3", "run.seed=5");
    }

    @Test
    void qwen2WithBiasesTemperatureAndEntropy() {
        check("qwen2", "run.seed=5", "models.policy.family=qwen2", "models.policy.size.hidden=384", "models.policy.size.layers=3",
                "models.policy.size.heads=4", "models.policy.size.kv_heads=4", "models.policy.size.intermediate=1024",
                "models.policy.size.tie_embeddings=false",
                "rollout.temperature=1.5", "ppo.micro_batch_size=3", "++ppo.entropy_coef=0.01");
    }

    /**
     * 30,000 ids: the materialised head's [N, V] float32 tensors are 205 MiB each (four at the end of
     * the forward, five at temperature 1.5); the fused head's chunks are 1,118 tokens (128 MiB of
     * logits, and at 1.5 their division: 256 MiB), 1,792 response tokens per micro-batch in two of them.
     */
    static final int BIG_VOCAB = 30_000;

    static String[] bigVocabulary(Path tok, String... more) {
        List<String> o = new ArrayList<>(List.of("run.seed=5", "++models.policy.path=" + tok, "++models.policy.init=random",
                "rollout.temperature=1.5"));
        o.addAll(List.of(more));
        return o.toArray(String[]::new);
    }

    @Test
    void fusedLmHeadAtALargeVocabularyAndTemperature() throws IOException {
        check("fused", bigVocabulary(bigVocabulary(tmp.resolve("tokenizer"), BIG_VOCAB), "ppo.fused_lm_head=true"));  // (the default, said)
    }

    /**
     * The same with the materialised head, what the switch buys (bench/README.md, "drmas plan"); about a
     * minute more, so only with -Ddrmas.plancheck.all=true.
     */
    @Test
    @EnabledIfSystemProperty(named = "drmas.plancheck.all", matches = "true")
    void materialisedLmHeadAtALargeVocabularyAndTemperature() throws IOException {
        check("materialised", bigVocabulary(bigVocabulary(tmp.resolve("tokenizer"), BIG_VOCAB), "ppo.fused_lm_head=false"));
    }

    /**
     * A deep model (16 layers, 15.8 M parameters) in bfloat16 with fp32 masters, on micro-batches of
     * one short row: the step after the micro-batches is the update's peak (the gradient norm's fp64
     * copy and square of the largest gradient), which one PointerScope around the norm's and AdamW's
     * loops made a copy of every parameter (measured 241.8 MiB where the plan says 19.3). Two rows of
     * one task, so that generation stays below the update in the plan.
     */
    @Test
    void theOptimiserStepOfADeepModel() {
        // the median of three steps' readings (trainer.steps 4, the first not measured): its ~20 MiB
        // update is small beside the JVM's compiler arenas, which a single step's reading met once
        // (12.4 MiB in a fresh-clone CI run against 20.2 alone)
        check("step", "run.seed=5", "trainer.steps=4", "models.policy.size.layers=16", "models.policy.size.intermediate=1024",
                "models.policy.dtype=bfloat16", "rollout.max_new_tokens=8", "rollout.tasks_per_step=1", "rollout.rollouts_per_task=2",
                "ppo.mini_batch_size=2", "ppo.micro_batch_size=1");
    }

    @Test
    void twoLlamaModelsWithReference() {
        String llama = "{family: llama, size: {hidden: 256, layers: 4, heads: 8, kv_heads: 2, intermediate: 688, max_positions: 512}}";
        String yaml = BASE.replaceFirst("(?s)models:.*?orchestra: \\{name: math, options: \\{max_loops: 1}}", """
                models:
                  solver_model: %s
                  verifier_model: %s
                agents:
                  - {id: solver, role: solver, model: solver_model}
                  - {id: verifier, role: verifier, model: verifier_model}
                orchestra: {name: math, options: {max_loops: 2}}""".formatted(llama, llama));
        checkYaml("llama", yaml, "++ppo.reference_model=true", "++ppo.kl_coef=0.01");
    }
}
