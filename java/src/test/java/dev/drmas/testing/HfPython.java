// HfPython.java — a Python with HF transformers, for the tests tagged "hf" that have transformers itself
// open model folders drmas wrote (src/test/resources/dev/drmas/model/hf/load_drmas.py), or run another
// script on them (ppo_oracle.py: an independent PPO update, PpoOracleTest; rollout/hf/generate_oracle.py:
// transformers' own generation, HfGenerationOracleTest). It is named by
// DRMAS_HF_PYTHON (bench/hf-venv.sh makes one); where that is unset the tests skip saying so, as the
// "gpu" tests skip without a GPU; where it is set but cannot run the script, they fail: the check was
// asked for, and a skip would read as a pass.
package dev.drmas.testing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.drmas.algo.Tolerance;
import dev.drmas.model.CausalLm;
import dev.drmas.model.SafeTensors;
import dev.drmas.model.Tensors;
import java.io.IOException;
import java.net.URISyntaxException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.Device;
import org.bytedeco.pytorch.NoGradGuard;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.junit.jupiter.api.Assumptions;

public final class HfPython {
    /** The environment variable that names the Python (a venv's bin/python) with torch, transformers and safetensors. */
    public static final String ENV = "DRMAS_HF_PYTHON";
    /** How long one run of the script may take: it imports torch and transformers once, then loads tiny models. */
    static final long TIMEOUT_S = 600;

    private static final ObjectMapper JSON = new ObjectMapper();

    private final Path python;

    private HfPython(Path python) {
        this.python = python;
    }

    /** The Python of DRMAS_HF_PYTHON, or a JUnit assumption failure (test skipped) saying how to run the check. */
    public static HfPython require() {
        String env = System.getenv(ENV);
        Assumptions.assumeTrue(env != null && !env.isBlank(), () -> ENV + " is not set: drmas is not checked against "
                + "HF transformers here; test skipped (bench/hf-venv.sh makes a Python for it, README, \"The two commands\")");
        Path p = Path.of(env);
        assertTrue(Files.isExecutable(p), ENV + "=" + env + " is not an executable file");
        return new HfPython(p);
    }

    /**
     * One folder for transformers to open: {@code ids} [B][T] under {@code mask} (1 real, 0 padding, left
     * padding as generation batches), and {@code texts} for its tokenizer to encode where the folder has one.
     */
    public record Case(String name, Path dir, long[][] ids, long[][] mask, List<String> texts) {
        /** Whether query (b, t) is a real token: padding queries are not compared (HF's eager attention gives them uniform weights). */
        boolean valid(int b, int t) {
            return mask[b][t] != 0;
        }
    }

    /** Runs load_drmas.py over {@code cases}; its files go to {@code work}. Fails with the script's output if it fails. */
    public Result load(List<Case> cases, Path work) throws IOException, InterruptedException {
        ObjectNode manifest = JSON.createObjectNode();
        ArrayNode list = manifest.putArray("cases");
        for (Case c : cases) {
            ObjectNode n = list.addObject();
            n.put("name", c.name());
            n.put("dir", c.dir().toAbsolutePath().toString());
            n.set("ids", JSON.valueToTree(c.ids()));
            n.set("mask", JSON.valueToTree(c.mask()));
            n.set("texts", JSON.valueToTree(c.texts()));
        }
        Path out = run("load_drmas.py", manifest, work);
        return new Result(JSON.readTree(out.resolve("report.json").toFile()), out.resolve("logits.safetensors"), cases,
                Files.readString(work.resolve("python.log"), StandardCharsets.UTF_8));
    }

    /**
     * Runs {@code script} (a file of src/test/resources/dev/drmas/model/hf/, or a test resource's absolute
     * path, "/dev/drmas/...") as {@code script MANIFEST OUT}
     * with {@code manifest} written to {@code work}/manifest.json; returns OUT ({@code work}/out). Its output
     * goes to {@code work}/python.log. Fails with that output if it fails or takes more than TIMEOUT_S.
     */
    public Path run(String script, JsonNode manifest, Path work) throws IOException, InterruptedException {
        Files.createDirectories(work);
        Path manifestFile = work.resolve("manifest.json"), out = work.resolve("out"), log = work.resolve("python.log");
        JSON.writeValue(manifestFile.toFile(), manifest);
        Process p = new ProcessBuilder(python.toString(), script(script).toString(), manifestFile.toString(), out.toString())
                .redirectErrorStream(true).redirectOutput(log.toFile()).start();
        if (!p.waitFor(TIMEOUT_S, TimeUnit.SECONDS)) {
            p.destroyForcibly();
            fail(python + " " + script + " took more than " + TIMEOUT_S + " s; its output:\n" + Files.readString(log));
        }
        if (p.exitValue() != 0) {
            fail(python + " " + script + " exited with " + p.exitValue() + " (does " + ENV
                    + " name a Python with torch, transformers >= 5 and safetensors?); its output:\n" + Files.readString(log));
        }
        return out;
    }

    /**
     * Weights of drmas's own drawing for the hf tests, moved away from its init (std 0.02, norms 1, biases as
     * weights) so that logits are far from uniform and every tensor, norms and biases included, changes them:
     * std 0.15, norms 1 ± 0.3; rounded to bfloat16 values where {@code bf16Grid}, so that a bf16 file holds
     * exactly the float32 model.
     */
    public static void perturb(CausalLm m, long seed, boolean bf16Grid) {
        SplittableRandom r = new SplittableRandom(seed);
        try (PointerScope scope = new PointerScope(); NoGradGuard g = new NoGradGuard()) {
            Map<String, long[]> shapes = CausalLm.parameterShapes(m.config());
            for (Map.Entry<String, Tensor> e : m.parameters().entrySet()) {
                Tensor p = e.getValue();
                float[] a = new float[(int) p.numel()];
                boolean norm = e.getKey().endsWith("norm.weight");
                for (int i = 0; i < a.length; i++) a[i] = (float) ((norm ? 1 : 0) + r.nextGaussian() * (norm ? 0.3 : 0.15));
                Tensor t = Tensors.floats(a).reshape(shapes.get(e.getKey()));
                p.copy_(bf16Grid ? t.to(ScalarType.BFloat16).to(ScalarType.Float) : t);
            }
        }
    }

    private static Path script(String name) {
        try {
            return Path.of(HfPython.class.getResource(name.startsWith("/") ? name : "/dev/drmas/model/hf/" + name).toURI());
        } catch (URISyntaxException | NullPointerException e) {
            throw new IllegalStateException(name + " is not among the test resources", e);
        }
    }

    /** What transformers said about each case. */
    public static final class Result {
        private final JsonNode report;
        private final Path logits;
        private final List<Case> cases;
        private final String output;

        Result(JsonNode report, Path logits, List<Case> cases, String output) {
            this.report = report;
            this.logits = logits;
            this.cases = cases;
            this.output = output;
        }

        /** The report of case {@code name}: loading info, warnings, dtype, class, tokenizer ids. */
        public JsonNode report(String name) {
            JsonNode r = report.path("cases").get(name);
            if (r == null) fail("load_drmas.py wrote no report for " + name);
            return r;
        }

        /** transformers' version, for messages. */
        public String versions() {
            return "transformers " + report.path("transformers").asText() + ", torch " + report.path("torch").asText();
        }

        /**
         * Case {@code name} loaded as class {@code cls} in {@code dtype}, its LM head tied to the embeddings
         * or not as {@code tied} says, with no missing, unexpected or mismatched keys, no loading error, and
         * not one warning (none is expected of a sound folder: each would be a finding).
         */
        public void assertLoadedCleanly(String name, String cls, String dtype, boolean tied) {
            JsonNode r = report(name);
            if (r.has("error")) fail(name + ": transformers cannot load it (" + versions() + "): " + r.get("error").asText()
                    + "\n" + r.path("traceback").asText());
            assertEquals(cls, r.get("class").asText(), name + ": the class transformers chose");
            assertEquals(dtype, r.get("dtype").asText(), name + ": the dtype transformers loads it in (config.json's)");
            assertEquals(tied, r.get("tied").asBoolean(), name + ": whether transformers ties the LM head to the embeddings");
            for (Iterator<String> it = r.get("loading_info").fieldNames(); it.hasNext(); ) {
                String k = it.next();
                assertEquals(0, r.get("loading_info").get(k).size(), name + ": transformers' " + k + ": " + r.get("loading_info").get(k));
            }
            List<String> said = new ArrayList<>();
            r.get("warnings").forEach(w -> said.add(w.asText()));
            r.get("log").forEach(w -> said.add(w.asText()));
            assertTrue(said.isEmpty(), name + ": transformers warned while loading it (" + versions() + "): " + said);
        }

        /**
         * transformers' float32 logits of case {@code name} against drmas's {@code expected} [B, T, V],
         * over the real queries: |hf − drmas| ≤ atol + rtol·|drmas|. Returns the largest difference.
         */
        public double assertLogits(String name, float[] expected, int vocab, double atol, double rtol) {
            Case c = cases.stream().filter(x -> x.name().equals(name)).findFirst().orElseThrow();
            float[] hf;
            try (SafeTensors st = SafeTensors.open(logits)) {
                hf = Tensors.toFloats(st.get(name, ScalarType.Float, new Device("cpu")));
            }
            int rows = c.ids().length, len = c.ids()[0].length;
            assertEquals((long) rows * len * vocab, hf.length, name + ": transformers' logits are not [" + rows + ", " + len + ", " + vocab + "]");
            assertEquals(hf.length, expected.length, name + ": drmas's logits");
            int real = 0;
            for (int b = 0; b < rows; b++) for (int t = 0; t < len; t++) if (c.valid(b, t)) real++;
            float[] af = new float[real * vocab], ef = new float[real * vocab];
            double worst = 0;
            int k = 0;
            for (int b = 0; b < rows; b++) {
                for (int t = 0; t < len; t++) {
                    if (!c.valid(b, t)) continue;
                    for (int v = 0; v < vocab; v++, k++) {
                        int i = (b * len + t) * vocab + v;
                        af[k] = hf[i];
                        ef[k] = expected[i];
                        worst = Math.max(worst, Math.abs(af[k] - ef[k]));
                    }
                }
            }
            Tolerance.assertClose(name + ": transformers' logits vs drmas's", af, ef, atol, rtol);
            return worst;
        }

        /** The ids transformers' AutoTokenizer encoded case {@code name}'s texts to (add_special_tokens=False). */
        public List<int[]> tokenIds(String name) {
            JsonNode tok = report(name).get("tokenizer");
            if (tok == null) fail(name + ": transformers loaded no tokenizer (no tokenizer.json in the folder?)");
            List<int[]> out = new ArrayList<>();
            for (JsonNode ids : tok.get("ids")) {
                int[] a = new int[ids.size()];
                for (int i = 0; i < a.length; i++) a[i] = ids.get(i).asInt();
                out.add(a);
            }
            return out;
        }

        /** The script's output (transformers' own stderr lines included), for messages. */
        public String output() {
            return output;
        }
    }
}
