// HfLoadsTrainedCheckpointsTest.java — a checkpoint the trainer wrote after real training steps
// (checkpoints/step_N/models/<id>: drmas's weights, config.json and the tokenizer files it copies)
// opened by HF transformers itself (load_drmas.py with the Python of DRMAS_HF_PYTHON): a Llama on the
// built-in tokenizer trained in bfloat16 with fp32 masters (so the export is a bf16 folder with
// untied embeddings, and its tokenizer.json and tokenizer_config.json are drmas-written), and a tied
// Qwen3 whose folder carries the real Qwen3 tokenizer. transformers must load both cleanly, give the
// logits drmas gives for the folder, and its AutoTokenizer must encode text to drmas's ids. Tagged
// "hf"; skipped where DRMAS_HF_PYTHON is unset or the Qwen3 tokenizer fixture is absent.
package dev.drmas.train;

import static org.junit.jupiter.api.Assertions.assertAll;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.drmas.config.RunConfig;
import dev.drmas.model.CausalLm;
import dev.drmas.model.Family;
import dev.drmas.model.ModelConfig;
import dev.drmas.model.Tensors;
import dev.drmas.testing.Fixtures;
import dev.drmas.testing.HfPython;
import dev.drmas.tokenizer.HfTokenizer;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;
import org.junit.jupiter.api.io.TempDir;

@Tag("hf")
class HfLoadsTrainedCheckpointsTest {
    /** float32 on both sides (the bf16 export read as float32), as HfLoadsDrmasCheckpointsTest. */
    static final double ATOL = 1e-4, RTOL = 1e-4;
    /** Tokens of each text whose logits are compared: [3, 12, 151669] floats are 22 MB for Qwen3's vocabulary. */
    static final int[] ROW_TOKENS = {12, 8, 5};

    /**
     * What the tokenizers must agree on: a chat turn with special tokens and agent tags, text outside
     * ASCII (the built-in tokenizer's byte fallback, Qwen3's byte-level BPE), digits and spaces.
     */
    static final List<String> TEXTS = List.of(
            "<|im_start|>user\nWhat is 12 + 7?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n\\boxed{19}<|im_end|>",
            "<verify>The answer 19 is correct.</verify>  <search>Paris, France</search>\n<answer>yes</answer>",
            "héllo\twörld — 3.14 😀 日本語 ¿qué?");

    static final PrintStream QUIET = new PrintStream(new ByteArrayOutputStream());

    @TempDir
    Path tmp;

    @BeforeAll
    static void threads() {
        torch.set_num_threads(2);
    }

    @Test
    void transformersLoadsTheTrainersCheckpointsWithTheirTokenizers() throws Exception {
        HfPython python = HfPython.require();
        Path tok = Fixtures.qwen3Tokenizer();
        // the Qwen3 model's folder: drmas's random tiny Qwen3 (tied) beside the real tokenizer's files
        Path qwen = tmp.resolve("qwen3");
        Files.createDirectories(qwen);
        for (String f : List.of("tokenizer.json", "tokenizer_config.json")) Files.copy(tok.resolve(f), qwen.resolve(f));
        int vocab;
        try (HfTokenizer t = HfTokenizer.load(qwen)) {
            vocab = t.vocabSize();
        }
        try (CausalLm m = CausalLm.random(ModelConfig.tiny(Family.QWEN3, vocab).withTiedEmbeddings(true).withMaxPositions(512), 5)) {
            m.save(qwen);
        }
        String yaml = """
                run: {name: hf, seed: 3, threads: 2, device: cpu}
                data:
                  synthetic: {operands: 2, digits: 1, operators: ["+"], train_size: 40, test_size: 4}
                models:
                  policy:
                    family: llama
                    size: {hidden: 32, layers: 2, heads: 4, kv_heads: 2, intermediate: 64, max_positions: 512, tie_embeddings: false}
                    dtype: bfloat16
                    optim: {lr: 1.0e-3, weight_decay: 0.01, grad_clip: 1.0}
                  qmodel:
                    path: %s
                    chat_template_kwargs: {enable_thinking: false}
                    optim: {lr: 1.0e-3, weight_decay: 0.01, grad_clip: 1.0}
                agents:
                  - {id: solver, role: solver, model: policy}
                  - {id: verifier, role: verifier, model: qmodel}
                rollout: {tasks_per_step: 2, rollouts_per_task: 3, temperature: 1.0, max_new_tokens: 6, max_prompt_tokens: 400}
                algorithm: {mode: drmas}
                ppo: {epochs: 1, mini_batch_size: 6, micro_batch_size: 3, entropy_coef: 0.01}
                trainer: {steps: 2, eval_freq: 0, eval_before_train: false, save_freq: 2}
                metrics: {progress_bar: false}
                """.formatted(qwen);
        try (Trainer t = Trainer.open(RunConfig.parse(yaml, List.of("run.output_dir=" + tmp.resolve("out"))), QUIET)) {
            t.train();
        }
        Path cp = new Checkpoints(tmp.resolve("out/hf/checkpoints")).latest().orElseThrow();
        JsonNode steps = Checkpoints.state(cp).get("optimizer_steps");
        for (String id : List.of("policy", "qmodel")) assertTrue(steps.get(id).asLong() >= 2, id + " took optimiser steps: " + steps);
        // training moved the weights: the checkpoint's Qwen3 is not the folder it started from
        try (CausalLm start = CausalLm.load(qwen); CausalLm end = CausalLm.load(cp.resolve("models/qmodel"));
             PointerScope scope = new PointerScope()) {
            assertFalse(java.util.Arrays.equals(Tensors.toFloats(start.parameters().get("model.norm.weight")),
                    Tensors.toFloats(end.parameters().get("model.norm.weight"))), "training changed the Qwen3's weights");
        }

        // drmas's view of each checkpoint folder: its tokenizer's ids of TEXTS, and its logits over their first tokens
        Map<String, String> architecture = Map.of("policy", "LlamaForCausalLM", "qmodel", "Qwen3ForCausalLM");
        Map<String, String> dtype = Map.of("policy", "bfloat16", "qmodel", "float32");
        Map<String, Boolean> tied = Map.of("policy", false, "qmodel", true);
        List<HfPython.Case> cases = new ArrayList<>();
        Map<String, List<int[]>> ids = new LinkedHashMap<>();
        Map<String, float[]> logits = new LinkedHashMap<>();
        Map<String, Integer> vocabs = new LinkedHashMap<>();
        for (String id : architecture.keySet()) {
            Path folder = cp.resolve("models").resolve(id);
            for (String f : List.of("config.json", "tokenizer.json", "tokenizer_config.json")) {
                assertTrue(Files.isRegularFile(folder.resolve(f)), id + ": the checkpoint has " + f);
            }
            List<int[]> encoded = new ArrayList<>();
            long pad;
            try (HfTokenizer t = HfTokenizer.load(folder)) {
                for (String s : TEXTS) encoded.add(t.encode(s));
                pad = t.padTokenId().orElse(0);
            }
            ids.put(id, encoded);
            int len = ROW_TOKENS[0];
            long[][] rows = new long[TEXTS.size()][len], mask = new long[TEXTS.size()][len];
            for (int r = 0; r < rows.length; r++) {
                int n = ROW_TOKENS[r], start = len - n;  // left padding, as generation batches prompts
                assertTrue(encoded.get(r).length >= n, id + ": text " + r + " has " + n + " tokens");
                for (int s = 0; s < len; s++) {
                    rows[r][s] = s < start ? pad : encoded.get(r)[s - start];
                    mask[r][s] = s < start ? 0 : 1;
                }
            }
            try (CausalLm m = CausalLm.load(folder); PointerScope scope = new PointerScope()) {
                Tensor maskT = Tensors.longs(flat(mask), mask.length, len);
                logits.put(id, Tensors.toFloats(m.forward(Tensors.longs(flat(rows), rows.length, len), CausalLm.positionIds(maskT),
                        maskT, null)));
                vocabs.put(id, m.config().vocabSize());
            }
            cases.add(new HfPython.Case(id, folder, rows, mask, TEXTS));
        }

        HfPython.Result hf = python.load(cases, tmp.resolve("hf"));
        List<Executable> checks = new ArrayList<>();
        for (String id : architecture.keySet()) {
            checks.add(() -> {
                hf.assertLoadedCleanly(id, architecture.get(id), dtype.get(id), tied.get(id));
                double worst = hf.assertLogits(id, logits.get(id), vocabs.get(id), ATOL, RTOL);
                List<int[]> hfIds = hf.tokenIds(id);
                for (int i = 0; i < TEXTS.size(); i++) {
                    assertArrayEquals(ids.get(id).get(i), hfIds.get(i), id + ": transformers' AutoTokenizer ids of " + TEXTS.get(i));
                }
                try (HfTokenizer t = HfTokenizer.load(cp.resolve("models").resolve(id))) {
                    assertEquals(t.eosToken(), hf.report(id).get("tokenizer").get("eos_token").asText(), id + ": eos token");
                }
                System.out.printf("HfLoadsTrainedCheckpointsTest: %s (%s, %s): largest |logit difference| %.3g%n", id,
                        architecture.get(id), hf.versions(), worst);
            });
        }
        assertAll("transformers on the trainer's checkpoint " + cp, checks);
    }

    static long[] flat(long[][] a) {
        long[] out = new long[a.length * a[0].length];
        for (int i = 0; i < a.length; i++) System.arraycopy(a[i], 0, out, i * a[0].length, a[0].length);
        return out;
    }
}
