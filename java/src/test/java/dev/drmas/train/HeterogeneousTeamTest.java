// HeterogeneousTeamTest.java — a team of two models with two tokenizers trains: the solver on a
// built-in-tokenizer model, the verifier on a folder with the real Qwen3 tokenizer and its chat
// template, both warm-started by `drmas sft` (so that rewards differ within a group; the path's model
// then starts from its warm start, not its folder). One step gives non-zero advantages,
// moves both models' weights, and every agent's prompt is its own model's rendering and tokens.
package dev.drmas.train;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.agent.Message;
import dev.drmas.config.RunConfig;
import dev.drmas.model.CausalLm;
import dev.drmas.model.Family;
import dev.drmas.model.ModelConfig;
import dev.drmas.model.Tensors;
import dev.drmas.testing.Fixtures;
import dev.drmas.tokenizer.BuiltinTokenizer;
import dev.drmas.tokenizer.HfTokenizer;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.bytedeco.javacpp.PointerScope;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class HeterogeneousTeamTest {
    @TempDir
    Path tmp;

    static final PrintStream QUIET = new PrintStream(new ByteArrayOutputStream());

    static Map<String, float[]> weights(CausalLm m) {
        Map<String, float[]> w = new LinkedHashMap<>();
        try (PointerScope scope = new PointerScope()) {
            m.parameters().forEach((k, v) -> w.put(k, Tensors.toFloats(v)));
        }
        return w;
    }

    static boolean moved(Map<String, float[]> a, Map<String, float[]> b) {
        for (String k : a.keySet()) if (!Arrays.equals(a.get(k), b.get(k))) return true;
        return false;
    }

    @Test
    void aTeamOfTwoTokenizersTrains() throws Exception {
        Path tok = Fixtures.qwen3Tokenizer();
        Path qwen = tmp.resolve("qwen");
        Files.createDirectories(qwen);
        for (String f : List.of("tokenizer.json", "tokenizer_config.json")) Files.copy(tok.resolve(f), qwen.resolve(f));
        int vocab;
        try (HfTokenizer t = HfTokenizer.load(qwen)) {
            vocab = t.vocabSize();
        }
        try (CausalLm m = CausalLm.random(ModelConfig.tiny(Family.QWEN2, vocab).withMaxPositions(512), 5)) {
            m.save(qwen);
        }
        String yaml = TrainerEndToEndTest.YAML
                .replace("  - {id: verifier, role: verifier, model: policy}", "  - {id: verifier, role: verifier, model: qmodel}")
                .replace("agents:\n", "  qmodel:\n    path: " + qwen + "\n    chat_template_kwargs: {enable_thinking: false}\n"
                        + "    optim: {lr: 1.0e-3, weight_decay: 0.0, grad_clip: 1.0}\nagents:\n");
        RunConfig cfg = RunConfig.parse(yaml, List.of("run.output_dir=" + tmp, "run.name=team", "trainer.steps=1", "trainer.eval_freq=0",
                "trainer.save_freq=0", "rollout.rollouts_per_task=4", "rollout.temperature=1.5", "rollout.max_new_tokens=20",
                "sft.steps=200", "sft.batch_size=8", "sft.lr=5.0e-3", "sft.correct_prob=0.5"));
        // both models learn the formats first (`drmas sft`, the path's model too), so that rewards differ within a group
        try (Trainer t = Trainer.open(cfg.withOverrides(List.of("run.resume=never")), QUIET)) {
            t.sft();
        }
        try (Trainer t = Trainer.open(cfg, QUIET)) {
            var ps = t.policiesForTest();
            Map<String, float[]> p0 = weights(ps.get("policy").model()), q0 = weights(ps.get("qmodel").model());
            t.trainStep();
            RolloutBatch b = t.lastStep.batch();
            float[] adv = t.lastStep.adv().advantages();
            assertTrue(Arrays.stream(box(adv)).anyMatch(a -> a != 0), "non-zero advantages");
            assertTrue(moved(p0, weights(ps.get("policy").model())), "the solver's model moved");
            assertTrue(moved(q0, weights(ps.get("qmodel").model())), "the verifier's model moved");
            int[] seen = new int[2];
            for (int i = 0; i < b.rows(); i++) {
                int a = b.steps.get(i).agent();
                String model = cfg.agents().get(a).model();
                var p = ps.get(model);
                TurnData turn = b.turn(i);
                if (turn.promptTruncated()) continue;
                String text = p.chat().render(Message.toMaps(b.steps.get(i).prompt()), true);
                assertArrayEquals(p.tokenizer().encode(text), turn.promptIds(), "row " + i + ": its model's rendering and tokens");
                if (model.equals("qmodel")) {
                    assertTrue(text.endsWith("<|im_start|>assistant\n<think>\n\n</think>\n\n"), "the Qwen3 template with its kwargs: " + text);
                    assertTrue(Arrays.stream(turn.promptIds()).anyMatch(id -> id >= BuiltinTokenizer.VOCAB_SIZE), "Qwen3's ids");
                } else {
                    assertTrue(text.endsWith("<|im_start|>assistant\n") && !text.contains("<think>"), "ChatML of the built-in: " + text);
                    assertTrue(Arrays.stream(turn.promptIds()).allMatch(id -> id < BuiltinTokenizer.VOCAB_SIZE));
                }
                seen[a]++;
            }
            assertTrue(seen[0] > 0 && seen[1] > 0, Arrays.toString(seen) + " rows checked per agent");
            assertEquals("solver", cfg.agents().get(0).id());
            assertFalse(ps.get("policy").tokenizerDir().equals(ps.get("qmodel").tokenizerDir()));
        }
    }

    static Float[] box(float[] a) {
        Float[] o = new Float[a.length];
        for (int i = 0; i < a.length; i++) o[i] = a[i];
        return o;
    }
}
