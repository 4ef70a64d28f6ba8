// HfGenerationOracleTest.java — drmas's rollout engine against an implementation it shares no code with:
// HF transformers' own model.generate(do_sample=False) and its own forward (generate_oracle.py, run with the
// Python of DRMAS_HF_PYTHON), on tiny random folders drmas saves of each family. The greedy tokens of every
// engine mode (continuous with and without the prefix cache, across two turns; static; budgets small enough
// that requests join mid-way and turns run in several batches; LibTorch's layers as on a GPU) must be
// transformers' for prompts of 1 to 232 tokens (256 positions), stopping at eos where it stops; and the
// log-probs drmas records (greedy, and sampled at T = 0.7 and T = 1.3 with top-k and top-p) and the trainer's
// recomputed old log-probs (TeacherForcing) must be log_softmax(HF logits / T) at the same tokens.
// A second test runs two engine modes and sampling in bfloat16 and float16 against transformers in the same
// dtype: picks and log-probs within the dtype's rounding, and drmas's log-probs no further from the float32
// model's than 1.25 × transformers' (RMS). That bound catches a path a quarter less exact than transformers'
// (in transformers, float16 keys and values passed through bfloat16 made its error 2.2× what it was), not
// smaller ones (RMSNorm without its float32 upcast: 1.12×). Tagged "hf"; skipped where DRMAS_HF_PYTHON is unset.
package dev.drmas.rollout;

import static org.junit.jupiter.api.Assertions.assertAll;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.drmas.algo.Tolerance;
import dev.drmas.model.CausalLm;
import dev.drmas.model.Family;
import dev.drmas.model.ModelConfig;
import dev.drmas.model.SafeTensors;
import dev.drmas.model.Tensors;
import dev.drmas.testing.HfPython;
import dev.drmas.testing.TorchScope;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.Device;
import org.bytedeco.pytorch.NoGradGuard;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.function.Executable;
import org.junit.jupiter.api.io.TempDir;

@Tag("hf")
@ExtendWith(TorchScope.class)
class HfGenerationOracleTest {
    /** A few hundred ids, prime: enough for random models to have many candidates per step. */
    static final int VOCAB = 307;
    /** New tokens per request; with the tiny models' 256 positions the longest prompt is 232. */
    static final int NEW = 24;
    static final int POSITIONS = 256;
    /**
     * A greedy pick that is not HF's argmax passes only when HF's logit of it is within TIE of HF's best
     * (a near-tie that float32 summation order may break either way). The two implementations' logits
     * differ by ~1e-5 here; a wrong position, cache slot or mask moves them by far more than this.
     */
    static final double TIE = 1e-3;
    /** Log-probs: float32 on both sides, different summation orders; |drmas − hf| ≤ atol + rtol·|hf|. */
    static final double LP_ATOL = 2e-4, LP_RTOL = 1e-4;

    static final ObjectMapper JSON = new ObjectMapper();

    @TempDir
    Path dir;

    /** One way of running the engine over both turns; the greedy tokens of each must be HF's. */
    record Mode(String name, Generator.Engine engine, boolean budget, boolean prefixCache, boolean libtorchLayers) {
        Generator generator(CausalLm m, long budgetTokens) {
            m.decodeNative(!libtorchLayers);
            Generator g = new Generator(m, budget ? budgetTokens : 0, engine);
            return prefixCache ? g.keepPrefixes(0) : g;
        }
    }

    static final List<Mode> GREEDY_MODES = List.of(
            new Mode("continuous, 3 rows, prefix cache", Generator.Engine.CONTINUOUS, true, true, false),
            new Mode("continuous, 3 rows", Generator.Engine.CONTINUOUS, true, false, false),
            new Mode("continuous, unbounded", Generator.Engine.CONTINUOUS, false, false, false),
            new Mode("continuous, 3 rows, prefix cache, LibTorch layers", Generator.Engine.CONTINUOUS, true, true, true),
            new Mode("static, 3 rows' budget", Generator.Engine.STATIC, true, false, false),
            new Mode("static, unbounded", Generator.Engine.STATIC, false, false, false));

    /** Sampled rollouts: temperature ≠ 1, one plain, one with top-k and top-p (log-probs are the unfiltered ones). */
    record Sampled(String name, SamplingParams params, long seed) {
    }

    static final List<Sampled> SAMPLED = List.of(
            new Sampled("T 0.7", new SamplingParams(0.7, 0, 1.0), 5),
            new Sampled("T 1.3, top-k 20, top-p 0.9", new SamplingParams(1.3, 20, 0.9), 6));
    static final List<Mode> SAMPLED_MODES = List.of(GREEDY_MODES.get(0), GREEDY_MODES.get(4));

    /** A turn's requests and what each mode gave for them. */
    record Run(String what, double temperature, SamplingParams params, List<Request> requests, List<Completion> got,
               float[] teacherForced) {
    }

    /**
     * The dtype both sides run in, and what separates a difference of arithmetic from a defect there:
     * {@code tie}, how far below HF's best logit a greedy pick may be (or a sampled token outside HF's
     * filters), and the log-probs' atol and rtol.
     */
    record Precision(ScalarType dtype, double tie, double lpAtol, double lpRtol) {
        String name() {
            return CausalLm.dtypeName(dtype);
        }
    }

    static final Precision FLOAT32 = new Precision(ScalarType.Float, TIE, LP_ATOL, LP_RTOL);

    /** Everything one family's model produced, and the names of HF's cases for it. */
    static final class FamilyRun {
        final Family family;
        final Path folder;
        final List<Request> turn1, turn2;
        final Precision precision;
        int eos;
        final List<Run> runs = new ArrayList<>();
        final Map<String, Generator.Stats> stats = new LinkedHashMap<>();
        final Map<String, Integer> batches = new LinkedHashMap<>();

        FamilyRun(Family family, Path folder, List<Request> turn1, List<Request> turn2, Precision precision) {
            this.family = family;
            this.folder = folder;
            this.turn1 = turn1;
            this.turn2 = turn2;
            this.precision = precision;
        }

        String generateCase(int[] prompt) {
            return family + "/" + precision.name() + "/g/" + Arrays.hashCode(prompt) + "/" + prompt.length;
        }

        /** The key of HF's score case of {@code seq} (prompt and response) for this family's model in its dtype. */
        String scoreKey(int[] seq) {
            return family + "/" + precision.name() + Arrays.toString(seq);
        }

        String what() {
            return precision.dtype() == ScalarType.Float ? family.toString() : family + " in " + precision.name();
        }
    }

    @Test
    void greedyTokensAndLogProbsAreTransformersOwn() throws Exception {
        HfPython python = HfPython.require();
        List<FamilyRun> families = new ArrayList<>();
        ObjectNode manifest = JSON.createObjectNode();
        ArrayNode generate = manifest.putArray("generate"), score = manifest.putArray("score");
        Map<String, String> scoreNames = new HashMap<>();  // (family, prompt + response) → HF case
        Map<String, Boolean> generateNames = new HashMap<>();
        long seed = 11;
        for (Family f : Family.values()) {
            ModelConfig c = ModelConfig.tiny(f, VOCAB);
            assertEquals(POSITIONS, c.maxPositionEmbeddings(), f + ": the prompts below are sized for 256 positions");
            SplittableRandom rng = new SplittableRandom(seed);
            List<Request> turn1 = turn1(rng), turn2 = turn2(turn1, rng);
            FamilyRun fr = new FamilyRun(f, dir.resolve(f.modelType()), turn1, turn2, FLOAT32);
            try (CausalLm m = CausalLm.random(c, seed); PointerScope scope = new PointerScope()) {
                HfPython.perturb(m, seed, false);
                m.save(fr.folder, ScalarType.Float, CausalLm.DEFAULT_SHARD_BYTES);
                fr.eos = chooseEos(m, turn1, turn2);
                // three rows of the first turn's longest prompt + NEW (256 slots): requests join as rows finish, the static engine runs several batches
                long budget = 3L * POSITIONS;
                for (Mode mode : GREEDY_MODES) {
                    GenerationConfig cfg = GenerationConfig.greedy(NEW, Set.of(fr.eos));
                    runTurns(fr, m, mode, budget, cfg, 0.0, "greedy, " + mode.name());
                }
                for (Sampled s : SAMPLED) {
                    GenerationConfig cfg = GenerationConfig.greedy(NEW, Set.of(fr.eos)).withSampling(s.params(), s.seed());
                    for (Mode mode : SAMPLED_MODES) runTurns(fr, m, mode, budget, cfg, s.params().temperature(), s.name() + ", " + mode.name());
                }
                m.decodeNative(true);
            }
            addCases(fr, generate, score, scoreNames, generateNames);
            families.add(fr);
            seed += 10;
        }

        Path out = python.run("/dev/drmas/rollout/hf/generate_oracle.py", manifest, dir.resolve("hf"));
        JsonNode report = JSON.readTree(out.resolve("report.json").toFile());
        String versions = "transformers " + report.path("transformers").asText() + ", torch " + report.path("torch").asText();
        Map<String, float[]> scores = scores(out, scoreNames);

        List<Executable> checks = new ArrayList<>();
        Worst worst = new Worst();
        for (FamilyRun fr : families) {
            for (Run run : fr.runs) {
                checks.add(() -> check(fr, run, report.get("generate"), scores, scoreNames, worst));
            }
            checks.add(() -> coverage(fr));
        }
        assertAll("drmas's generation against transformers' (" + versions + ")", checks);
        System.out.printf("HfGenerationOracleTest: %d generate and %d score cases, %s; greedy: %d tokens, %d near-ties"
                        + " (largest gap where they part %.3g; closest HF top-2 margin of any pick %.3g); largest |log-prob difference| recorded %.3g,"
                        + " teacher-forced %.3g%n", generate.size(), score.size(), versions, worst.greedyTokens, worst.ties,
                worst.tieGap, worst.closest, worst.recorded, worst.teacherForced);
    }

    /**
     * Generation in bfloat16 and float16 against transformers in the same dtype (the same float32 folder
     * loaded in it by both): every greedy pick is HF's argmax after drmas's own tokens up to a tie of the
     * dtype's rounding, sampled tokens are inside HF's filters up to it, and the recorded and recomputed
     * log-probs are HF's within the dtype's noise. Two implementations of the same arithmetic in 8 or 11
     * significant bits part more than in float32; a wrong dtype somewhere (a norm or rotary in the reduced
     * dtype that HF keeps in float32, a cache stored or read in another) moves them further.
     */
    static final List<Precision> REDUCED = List.of(
            new Precision(ScalarType.BFloat16, 0.25, 0.15, 0.02),
            new Precision(ScalarType.Half, 0.04, 0.03, 0.005));

    /** How much further from the float32 model's log-probs drmas's may be than transformers' in the same dtype (RMS). */
    static final double ACCURACY = 1.25;

    @Test
    void reducedPrecisionGenerationIsTransformersWithinTheDtypesRounding() throws Exception {
        HfPython python = HfPython.require();
        List<FamilyRun> runs = new ArrayList<>();
        ObjectNode manifest = JSON.createObjectNode();
        ArrayNode generate = manifest.putArray("generate"), score = manifest.putArray("score");
        Map<String, String> scoreNames = new HashMap<>();
        Map<String, Boolean> generateNames = new HashMap<>();
        long seed = 211;
        for (Precision pr : REDUCED) {
            for (Family f : Family.values()) {
                SplittableRandom rng = new SplittableRandom(seed);
                List<Request> turn1 = turn1(rng), turn2 = turn2(turn1, rng);
                FamilyRun fr = new FamilyRun(f, dir.resolve(pr.name()).resolve(f.modelType()), turn1, turn2, pr);
                try (CausalLm m32 = CausalLm.random(ModelConfig.tiny(f, VOCAB), seed); PointerScope scope = new PointerScope()) {
                    HfPython.perturb(m32, seed, false);
                    m32.save(fr.folder, ScalarType.Float, CausalLm.DEFAULT_SHARD_BYTES);
                }
                try (CausalLm m = CausalLm.load(fr.folder, pr.dtype(), new Device("cpu")); PointerScope scope = new PointerScope()) {
                    assertEquals(pr.dtype(), m.dtype());
                    fr.eos = chooseEos(m, turn1, turn2);
                    long budget = 3L * POSITIONS;
                    for (Mode mode : SAMPLED_MODES) {  // (the two modes the float32 test samples with: continuous with the prefix cache, static)
                        runTurns(fr, m, mode, budget, GenerationConfig.greedy(NEW, Set.of(fr.eos)), 0.0, "greedy, " + mode.name());
                    }
                    Sampled s = SAMPLED.get(1);
                    runTurns(fr, m, GREEDY_MODES.get(0), budget, GenerationConfig.greedy(NEW, Set.of(fr.eos)).withSampling(s.params(), s.seed()),
                            s.params().temperature(), s.name() + ", " + GREEDY_MODES.get(0).name());
                    m.decodeNative(true);
                }
                addCases(fr, generate, score, scoreNames, generateNames);
                // and each sequence's float32 logits: the truth both sides' roundings are measured against
                for (Run run : fr.runs) {
                    for (int i = 0; i < run.requests().size(); i++) {
                        int[] seq = sequence(run.requests().get(i), run.got().get(i));
                        String key = "float32 of " + fr.scoreKey(seq);
                        if (scoreNames.containsKey(key)) continue;
                        String name = fr.family + "/" + pr.name() + "/ref/" + scoreNames.size();
                        scoreNames.put(key, name);
                        ObjectNode sc = score.addObject();
                        sc.put("name", name);
                        sc.put("dir", fr.folder.toAbsolutePath().toString());
                        sc.put("dtype", "float32");
                        sc.set("ids", JSON.valueToTree(seq));
                        sc.put("from", run.requests().get(i).promptIds().length);
                    }
                }
                runs.add(fr);
                seed += 10;
            }
        }
        Path out = python.run("/dev/drmas/rollout/hf/generate_oracle.py", manifest, dir.resolve("hf"));
        JsonNode report = JSON.readTree(out.resolve("report.json").toFile());
        String versions = "transformers " + report.path("transformers").asText() + ", torch " + report.path("torch").asText();
        Map<String, float[]> scores = scores(out, scoreNames);
        List<Executable> checks = new ArrayList<>();
        Map<String, Worst> worst = new LinkedHashMap<>();
        for (Precision pr : REDUCED) worst.put(pr.name(), new Worst());
        for (FamilyRun fr : runs) {
            for (Run run : fr.runs) checks.add(() -> check(fr, run, report.get("generate"), scores, scoreNames, worst.get(fr.precision.name())));
        }
        // as accurate as transformers in the same dtype: the RMS of drmas's log-probs' error against the float32 model's is
        // at most ACCURACY × transformers' (a part of the arithmetic done in the reduced dtype where HF keeps float32, or
        // with fewer bits, shows here first: the per-token bounds above must leave room for the roundings' spread)
        Map<String, double[]> err = new LinkedHashMap<>();  // dtype -> {Σ (drmas − fp32)², Σ (hf − fp32)², n}
        for (FamilyRun fr : runs) {
            double[] e = err.computeIfAbsent(fr.precision.name(), k -> new double[3]);
            for (Run run : fr.runs) {
                double t = run.temperature() == 0 ? 1.0 : run.temperature();
                for (int i = 0; i < run.requests().size(); i++) {
                    int[] seq = sequence(run.requests().get(i), run.got().get(i)), d = run.got().get(i).tokens();
                    float[] hf = scores.get(scoreNames.get(fr.scoreKey(seq))), ref = scores.get(scoreNames.get("float32 of " + fr.scoreKey(seq)));
                    for (int k = 0; k < d.length; k++) {
                        double truth = logSoftmaxAt(ref, k, d[k], t);
                        e[0] += Math.pow(run.got().get(i).logprobs()[k] - truth, 2);
                        e[1] += Math.pow(logSoftmaxAt(hf, k, d[k], t) - truth, 2);
                        e[2]++;
                    }
                }
            }
        }
        err.forEach((name, e) -> checks.add(() -> {
            double mine = Math.sqrt(e[0] / e[2]), theirs = Math.sqrt(e[1] / e[2]);
            System.out.printf("HfGenerationOracleTest: %s: RMS error of the recorded log-probs against the float32 model's: drmas %.3g, "
                    + "transformers %.3g (%.0f tokens)%n", name, mine, theirs, e[2]);
            assertTrue(mine <= ACCURACY * theirs, name + ": drmas's log-probs are further from the float32 model's (RMS " + mine
                    + ") than " + ACCURACY + " × transformers' in the same dtype (" + theirs + ")");
        }));
        try {
            assertAll("drmas's generation in reduced precision against transformers' (" + versions + ")", checks);
        } finally {
            worst.forEach((name, w) -> System.out.printf("HfGenerationOracleTest: %s: greedy %d tokens, %d near-ties (largest gap where they "
                            + "part %.3g); largest |log-prob difference| recorded %.3g, teacher-forced %.3g%n", name, w.greedyTokens, w.ties,
                    w.tieGap, w.recorded, w.teacherForced));
        }
    }

    /** HF's logits of every score case, by case name, from the oracle's scores.safetensors in {@code out}. */
    static Map<String, float[]> scores(Path out, Map<String, String> scoreNames) throws java.io.IOException {
        Map<String, float[]> scores = new HashMap<>();
        try (SafeTensors st = SafeTensors.open(out.resolve("scores.safetensors")); PointerScope scope = new PointerScope()) {
            for (String name : scoreNames.values()) scores.put(name, Tensors.toFloats(st.get(name, ScalarType.Float, new Device("cpu"))));
        }
        return scores;
    }

    /** HF's cases for what {@code fr}'s runs produced: a greedy generation per prompt, a forward per sequence. */
    static void addCases(FamilyRun fr, ArrayNode generate, ArrayNode score, Map<String, String> scoreNames, Map<String, Boolean> generateNames) {
        for (Request r : concat(fr.turn1, fr.turn2)) {
            String name = fr.generateCase(r.promptIds());
            if (generateNames.putIfAbsent(name, true) != null) continue;
            ObjectNode g = generate.addObject();
            g.put("name", name);
            g.put("dir", fr.folder.toAbsolutePath().toString());
            g.put("dtype", fr.precision.name());
            g.set("prompt", JSON.valueToTree(r.promptIds()));
            g.put("max_new_tokens", NEW);
            g.set("eos", JSON.valueToTree(new int[] {fr.eos}));
        }
        for (Run run : fr.runs) {
            for (int i = 0; i < run.requests().size(); i++) {
                int[] seq = sequence(run.requests().get(i), run.got().get(i));
                String key = fr.scoreKey(seq);
                if (scoreNames.containsKey(key)) continue;
                String name = fr.family + "/" + fr.precision.name() + "/s/" + scoreNames.size();
                scoreNames.put(key, name);
                ObjectNode s = score.addObject();
                s.put("name", name);
                s.put("dir", fr.folder.toAbsolutePath().toString());
                s.put("dtype", fr.precision.name());
                s.set("ids", JSON.valueToTree(seq));
                s.put("from", run.requests().get(i).promptIds().length);
            }
        }
    }

    /** The largest differences seen, for the summary line. */
    static final class Worst {
        int greedyTokens, ties;
        double tieGap, recorded, teacherForced;
        /** The closest call of all greedy picks: HF's best logit minus its second best, the smallest seen. */
        double closest = Double.POSITIVE_INFINITY;
    }

    /** One mode's two turns (the prefix cache, where kept, spans both), and the trainer's log-probs of what it sampled. */
    static void runTurns(FamilyRun fr, CausalLm m, Mode mode, long budget, GenerationConfig cfg, double temperature, String what) {
        Generator g = mode.generator(m, budget);
        int turn = 1;
        for (List<Request> reqs : List.of(fr.turn1, fr.turn2)) {
            List<Completion> got = g.generate(reqs, cfg);
            fr.stats.put(what + ", turn " + turn, g.lastStats());
            fr.batches.put(what + ", turn " + turn, g.lastBatches().size());
            float[] tf = null;
            if (temperature > 0) {
                List<int[]> prompts = new ArrayList<>(), responses = new ArrayList<>();
                for (int i = 0; i < reqs.size(); i++) {
                    prompts.add(reqs.get(i).promptIds());
                    responses.add(got.get(i).tokens());
                }
                try (PointerScope scope = new PointerScope(); NoGradGuard ng = new NoGradGuard()) {
                    tf = Tensors.toFloats(TeacherForcing.logProbs(m, prompts, responses, temperature, false).logprobs());
                }
            }
            fr.runs.add(new Run(what + ", turn " + turn, temperature, cfg.sampling(), reqs, got, tf));
            turn++;
        }
        g.clearPrefixes();
    }

    /** One run's completions against HF's greedy tokens (greedy runs) and HF's log-probs (all runs). */
    static void check(FamilyRun fr, Run run, JsonNode hfGenerate, Map<String, float[]> scores, Map<String, String> scoreNames,
                      Worst worst) {
        String where = fr.what() + ", " + run.what();
        Precision pr = fr.precision;
        List<String> failures = new ArrayList<>();
        List<Float> recorded = new ArrayList<>(), tf = new ArrayList<>();
        List<Double> reference = new ArrayList<>();
        int tfAt = 0;
        for (int i = 0; i < run.requests().size(); i++) {
            Request req = run.requests().get(i);
            Completion c = run.got().get(i);
            int[] d = c.tokens();
            String at = where + ", request " + i + " (prompt of " + req.promptIds().length + ")";
            float[] hf = scores.get(scoreNames.get(fr.scoreKey(sequence(req, c))));
            // a response ends at eos, as finish reason STOP_TOKEN, or at the budget
            boolean eosEnd = d.length > 0 && d[d.length - 1] == fr.eos;
            if (eosEnd != (c.finishReason() == Completion.FinishReason.STOP_TOKEN)
                    || !eosEnd && (d.length != NEW || c.finishReason() != Completion.FinishReason.LENGTH)) {
                failures.add(at + ": " + d.length + " tokens ending with " + (d.length == 0 ? "none" : d[d.length - 1])
                        + " finished as " + c.finishReason() + " (eos " + fr.eos + ", budget " + NEW + ")");
            }
            if (run.temperature() == 0) {
                int[] h = ints(hfGenerate.get(fr.generateCase(req.promptIds())));
                int j = 0;
                while (j < d.length && j < h.length && d[j] == h[j]) j++;
                if (j < d.length && j < h.length) {
                    // the first token where they part, after the same prefix: fine only if HF itself nearly picked drmas's
                    double gap = gap(hf, j, d[j]);
                    synchronized (worst) {
                        worst.ties++;
                        worst.tieGap = Math.max(worst.tieGap, gap);
                    }
                    System.out.printf("HfGenerationOracleTest: %s: token %d, drmas %d, transformers %d, HF's best logit − its logit of drmas's %.3g%n",
                            at, j, d[j], h[j], gap);
                    if (!(gap <= pr.tie())) {
                        failures.add(at + ": token " + j + " is " + d[j] + ", transformers' " + h[j] + " (HF's logit of "
                                + d[j] + " is " + gap + " below its best; drmas " + Arrays.toString(d) + ", transformers "
                                + Arrays.toString(h) + ")");
                    }
                } else if (d.length != h.length) {
                    failures.add(at + ": drmas stops after " + d.length + " tokens, transformers after " + h.length + " ("
                            + Arrays.toString(d) + " vs " + Arrays.toString(h) + ", eos " + fr.eos + ")");
                }
                // every pick, also past a near-tie, is HF's argmax given drmas's own tokens before it
                for (int k = 0; k < d.length; k++) {
                    double gk = gap(hf, k, d[k]), margin = top2(hf, k);
                    synchronized (worst) {
                        worst.closest = Math.min(worst.closest, margin);
                    }
                    if (!(gk <= pr.tie())) {
                        failures.add(at + ": token " + k + " = " + d[k] + " is not the greedy pick: HF's logit of it is "
                                + gk + " below its best after the same tokens");
                        break;
                    }
                }
                synchronized (worst) {
                    worst.greedyTokens += d.length;
                }
            } else {
                for (int k = 0; k < d.length; k++) {
                    String bad = outsideFilter(hf, k, d[k], run.params(), pr.tie());
                    if (bad != null) failures.add(at + ": sampled token " + k + " = " + d[k] + " " + bad);
                }
            }
            // what the engine recorded: log_softmax(logits / T) at its tokens (T 1 for greedy), unfiltered
            double t = run.temperature() == 0 ? 1.0 : run.temperature();
            for (int k = 0; k < d.length; k++) {
                recorded.add(c.logprobs()[k]);
                reference.add(logSoftmaxAt(hf, k, d[k], t));
                if (run.teacherForced() != null) tf.add(run.teacherForced()[tfAt++]);
            }
        }
        double[] ref = reference.stream().mapToDouble(Double::doubleValue).toArray();
        synchronized (worst) {
            worst.recorded = Math.max(worst.recorded, maxDiff(recorded, ref));
            if (run.teacherForced() != null) worst.teacherForced = Math.max(worst.teacherForced, maxDiff(tf, ref));
        }
        int scored = tfAt;
        // each of the three said separately: a wrong token must not hide wrong log-probs
        assertAll(where,
                () -> assertTrue(failures.isEmpty(), failures.size() + " findings:\n  "
                        + String.join("\n  ", failures.subList(0, Math.min(10, failures.size())))),
                () -> Tolerance.assertClose(where + ": recorded log-probs vs log_softmax(HF logits / " + t(run) + ")", floats(recorded), ref,
                        pr.lpAtol(), pr.lpRtol()),
                () -> {
                    if (run.teacherForced() == null) return;
                    assertEquals(scored, run.teacherForced().length, where + ": teacher-forced tokens");
                    Tolerance.assertClose(where + ": TeacherForcing log-probs vs log_softmax(HF logits / " + t(run) + ")", floats(tf), ref,
                            pr.lpAtol(), pr.lpRtol());
                });
    }

    /** What the runs must have exercised, else the comparison above proves less than it says. */
    static void coverage(FamilyRun fr) {
        String greedy = "greedy, " + GREEDY_MODES.get(0).name();
        Run first = fr.runs.stream().filter(r -> r.what().equals(greedy + ", turn 1")).findFirst().orElseThrow();
        long eosStops = first.got().stream().filter(c -> c.finishReason() == Completion.FinishReason.STOP_TOKEN).count();
        long lengthStops = first.got().stream().filter(c -> c.finishReason() == Completion.FinishReason.LENGTH).count();
        long distinct = first.got().stream().flatMapToInt(c -> Arrays.stream(c.tokens())).distinct().count();
        System.out.printf("HfGenerationOracleTest: %s: eos %d; greedy, turn 1: %d stops at eos, %d at the budget, %d distinct tokens%n",
                fr.family, fr.eos, eosStops, lengthStops, distinct);
        assertTrue(eosStops >= 2 && lengthStops >= 2, fr.family + ": greedy responses stopped at eos " + eosStops + " times, at the budget "
                + lengthStops + " times: both should occur");
        Generator.Stats t2 = fr.stats.get(greedy + ", turn 2");
        assertTrue(t2.reusedTokens() > 0, fr.family + ": the second turn took nothing from the prefix cache: " + t2);
        Generator.Stats joined = fr.stats.get("greedy, " + GREEDY_MODES.get(1).name() + ", turn 1");
        assertTrue(joined.admissions() >= 3 && joined.wrapped(), fr.family + ": requests did not join mid-way: " + joined);
        Generator.Stats stems = fr.stats.get("greedy, " + GREEDY_MODES.get(2).name() + ", turn 1");
        assertTrue(stems.prefilledTokens() < stems.promptTokens(), fr.family + ": no shared prompt or stem was prefilled once: " + stems);
        int batches = fr.batches.get("greedy, " + GREEDY_MODES.get(4).name() + ", turn 1");
        assertTrue(batches >= 3, fr.family + ": the static engine's budget gave " + batches + " batches");
    }

    // ------------------------------------------------------------------ prompts

    /**
     * The first turn: lengths 1 to 232 (the last at 256 positions with the new tokens), five prompts after a
     * 70-token stem (prefilled once: 4 × 70 tokens saved, more than a forward's worth), one prompt twice.
     */
    static List<Request> turn1(SplittableRandom rng) {
        List<int[]> prompts = new ArrayList<>();
        for (int len : new int[] {1, 2, 5, 13, 31, 64, POSITIONS - NEW}) prompts.add(random(rng, len));
        int[] stem = random(rng, 70);
        for (int tail : new int[] {1, 3, 9, 17, 40}) {
            int[] p = Arrays.copyOf(stem, 70 + tail);
            System.arraycopy(random(rng, tail), 0, p, 70, tail);
            prompts.add(p);
        }
        prompts.add(prompts.get(3).clone());  // a task's second rollout: the same prompt, its own stream
        List<Request> out = new ArrayList<>();
        for (int i = 0; i < prompts.size(); i++) out.add(new Request(prompts.get(i), 100 + i));
        return out;
    }

    /** The second turn: the stem's prompts and the 31-token one, each continued (a later turn's longer history). */
    static List<Request> turn2(List<Request> turn1, SplittableRandom rng) {
        List<Request> out = new ArrayList<>();
        for (Request r : turn1) {
            int[] p = r.promptIds();
            if (p.length != 31 && (p.length <= 70 || p.length > 110)) continue;
            int more = p.length == 31 ? 20 : 6;
            int[] q = Arrays.copyOf(p, p.length + more);
            System.arraycopy(random(rng, more), 0, q, p.length, more);
            out.add(new Request(q, r.stream() + 1000));
        }
        return out;
    }

    static int[] random(SplittableRandom rng, int len) {
        int[] p = new int[len];
        for (int j = 0; j < len; j++) p[j] = rng.nextInt(VOCAB);
        return p;
    }

    /**
     * An eos that ends some greedy responses early and not others: of drmas's greedy tokens without a stop
     * token (the static engine, one batch), the token that first appears at indices 2..NEW−3 in the most
     * responses, short of all but two. Chosen from drmas's tokens, but transformers gets the same id.
     */
    static int chooseEos(CausalLm m, List<Request> turn1, List<Request> turn2) {
        List<Completion> free = new Generator(m, 0, Generator.Engine.STATIC).generate(concat(turn1, turn2), GenerationConfig.greedy(NEW, Set.of()));
        int[] count = new int[VOCAB];
        for (Completion c : free) {
            boolean[] seen = new boolean[VOCAB];
            for (int j = 0; j < c.length(); j++) {
                int t = c.tokens()[j];
                if (!seen[t] && j >= 2 && j <= NEW - 3) count[t]++;
                seen[t] = true;
            }
        }
        int best = -1;
        for (int t = 0; t < VOCAB; t++) if (count[t] <= free.size() - 2 && (best < 0 || count[t] > count[best])) best = t;
        assertTrue(count[best] >= 2, "no token ends two greedy responses early: " + Arrays.toString(count));
        return best;
    }

    // ------------------------------------------------------------------ HF's numbers

    /** HF's best logit minus its logit of {@code tok} at response position {@code k} ([len, V] logits). */
    static double gap(float[] logits, int k, int tok) {
        double best = Double.NEGATIVE_INFINITY;
        for (int v = 0; v < VOCAB; v++) best = Math.max(best, logits[k * VOCAB + v]);
        return best - logits[k * VOCAB + tok];
    }

    /** HF's best logit minus its second best at response position k. */
    static double top2(float[] logits, int k) {
        double a = Double.NEGATIVE_INFINITY, b = Double.NEGATIVE_INFINITY;
        for (int v = 0; v < VOCAB; v++) {
            double x = logits[k * VOCAB + v];
            if (x > a) {
                b = a;
                a = x;
            } else if (x > b) {
                b = x;
            }
        }
        return a - b;
    }

    /** log_softmax(logits / t)[tok] at response position k, in float64. */
    static double logSoftmaxAt(float[] logits, int k, int tok, double t) {
        double max = Double.NEGATIVE_INFINITY, sum = 0;
        for (int v = 0; v < VOCAB; v++) max = Math.max(max, logits[k * VOCAB + v] / t);
        for (int v = 0; v < VOCAB; v++) sum += Math.exp(logits[k * VOCAB + v] / t - max);
        return logits[k * VOCAB + tok] / t - max - Math.log(sum);
    }

    /**
     * Null if {@code tok} is one HF's warpers keep at position k (temperature, top-k, then top-p over the
     * top-k tokens' renormalised probabilities, as transformers orders them), within {@code tie}; else why not.
     */
    static String outsideFilter(float[] logits, int k, int tok, SamplingParams p, double tie) {
        double t = p.temperature(), mine = logits[k * VOCAB + tok] / t;
        double[] z = new double[VOCAB];
        for (int v = 0; v < VOCAB; v++) z[v] = logits[k * VOCAB + v] / t;
        double[] sorted = z.clone();
        Arrays.sort(sorted);
        double kth = p.topK() > 0 ? sorted[VOCAB - p.topK()] : Double.NEGATIVE_INFINITY;
        if (mine < kth - tie) return "is below HF's top-" + p.topK() + " (scaled logit " + mine + " < " + kth + ")";
        double max = sorted[VOCAB - 1], total = 0, above = 0;
        for (double x : z) {
            if (x < kth) continue;
            double e = Math.exp(x - max);
            total += e;
            if (x > mine + tie) above += e;
        }
        if (above / total >= p.topP() + 1e-6) return "is outside HF's top-p " + p.topP() + " nucleus (mass above it " + above / total + ")";
        return null;
    }

    // ------------------------------------------------------------------ plumbing

    static int[] sequence(Request r, Completion c) {
        int[] p = r.promptIds(), s = Arrays.copyOf(p, p.length + c.length());
        System.arraycopy(c.tokens(), 0, s, p.length, c.length());
        return s;
    }

    static List<Request> concat(List<Request> a, List<Request> b) {
        List<Request> out = new ArrayList<>(a);
        out.addAll(b);
        return out;
    }

    static int[] ints(JsonNode a) {
        int[] out = new int[a.size()];
        for (int i = 0; i < out.length; i++) out[i] = a.get(i).asInt();
        return out;
    }

    static float[] floats(List<Float> a) {
        float[] out = new float[a.size()];
        for (int i = 0; i < out.length; i++) out[i] = a.get(i);
        return out;
    }

    static double maxDiff(List<Float> a, double[] ref) {
        double m = 0;
        for (int i = 0; i < ref.length; i++) m = Math.max(m, Math.abs(a.get(i) - ref[i]));
        return m;
    }

    static String t(Run run) {
        return run.temperature() == 0 ? "1 (greedy)" : String.valueOf(run.temperature());
    }
}
