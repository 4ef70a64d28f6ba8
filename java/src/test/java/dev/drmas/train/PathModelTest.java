// PathModelTest.java — a model loaded from an HF folder (models.id.path), whose config.json the run
// config cannot see: its max_position_embeddings is checked against rollout.max_prompt_tokens +
// rollout.max_new_tokens when the run opens, and a head padded past its tokenizer (as Qwen3's
// 151,936 rows for 151,669 ids) is trained over the tokenizer's ids only, the ids the rollout engine
// samples from: a training step leaves the head's rows past them untouched. A folder without a chat
// template that ChatML does not suit is warned in the run's notes (rank 0's log), not on every rank.
package dev.drmas.train;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.config.RunConfig;
import dev.drmas.model.CausalLm;
import dev.drmas.model.Family;
import dev.drmas.model.ModelConfig;
import dev.drmas.model.Tensors;
import dev.drmas.tokenizer.BuiltinTokenizer;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.global.torch;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class PathModelTest {
    static final int PADDING = 8, POSITIONS = 512;

    @TempDir
    Path tmp;

    @BeforeAll
    static void threads() {
        torch.set_num_threads(2);
    }

    /** A tiny Qwen3 folder: the built-in tokenizer, a head of PADDING rows more than its ids, POSITIONS positions. */
    static Path folder(Path dir) throws Exception {
        ModelConfig c = ModelConfig.tiny(Family.QWEN3, BuiltinTokenizer.VOCAB_SIZE + PADDING).withMaxPositions(POSITIONS);
        try (CausalLm m = CausalLm.random(c, 17)) {
            m.save(dir);
        }
        BuiltinTokenizer.writeTo(dir);
        return dir;
    }

    RunConfig config(Path model, String... overrides) {
        List<String> o = new ArrayList<>(List.of("run.output_dir=" + tmp.resolve("out"), "models.policy.path=" + model,
                "trainer.steps=1", "trainer.eval_freq=0", "trainer.save_freq=0", "ppo.epochs=1", "ppo.entropy_coef=0.01"));
        o.addAll(List.of(overrides));
        return RunConfig.parse(TrainerEndToEndTest.YAML, o);
    }

    @Test
    void aRunLongerThanTheModelsPositionsIsRefusedAtStart() throws Exception {
        Path model = folder(tmp.resolve("m"));
        // a config error (exit 1), not an internal one
        var e = assertThrows(dev.drmas.config.ConfigException.class, () -> Policies.open(config(model, "rollout.max_prompt_tokens="
                + (POSITIONS - 5), "rollout.max_new_tokens=6"), tmp.resolve("run"), null, null).close());
        assertEquals("rollout.max_new_tokens: with rollout.max_prompt_tokens (507), 507 + 6 = 513 positions, more than model 'policy' "
                + "takes: " + POSITIONS + " (max_position_embeddings in " + model.resolve("config.json") + ")", e.getMessage());
        // the last position is usable
        try (Policies ps = Policies.open(config(model, "rollout.max_prompt_tokens=" + (POSITIONS - 6), "rollout.max_new_tokens=6"),
                tmp.resolve("run"), null, null)) {
            assertEquals(POSITIONS, ps.get("policy").model().config().maxPositionEmbeddings());
        }
    }

    @Test
    void theChatMlFallbacksWarningIsANoteForRankZerosLogNotEveryRanksStandardError() throws Exception {
        // a Llama-like base folder: no chat template, a bos_token that ChatML never writes
        Path model = dev.drmas.tokenizer.ChatMlFallbackTest.llamaBase(folder(tmp.resolve("llama")), true, null);
        java.io.ByteArrayOutputStream err = new java.io.ByteArrayOutputStream();
        java.io.PrintStream was = System.err;
        List<String> notes;
        System.setErr(new java.io.PrintStream(err, true, java.nio.charset.StandardCharsets.UTF_8));
        try (Policies ps = Policies.open(config(model), tmp.resolve("run"), null, null)) {
            notes = List.copyOf(ps.notes);
        } finally {
            System.setErr(was);
        }
        String whose = "warning: model policy's tokenizer folder " + model + " has no chat template, so drmas renders its chats as ChatML";
        assertEquals(1, notes.stream().filter(n -> n.startsWith(whose)).count(), notes.toString());
        // Trainer.open logs the notes on rank 0 only; nothing of it on this process's standard error
        String printed = err.toString(java.nio.charset.StandardCharsets.UTF_8);
        assertTrue(!printed.contains("ChatML"), printed);
    }

    @Test
    void trainingLeavesTheHeadsRowsPastTheTokenizerAlone() throws Exception {
        Path model = folder(tmp.resolve("m"));
        float[] before, after;
        int hidden;
        try (CausalLm m = CausalLm.load(model); PointerScope scope = new PointerScope()) {
            before = Tensors.toFloats(m.parameters().get("lm_head.weight"));
            hidden = m.config().hiddenSize();
        }
        // the YAML's weight_decay is 0: a row without gradient keeps its exact value under AdamW; the
        // entropy bonus gives every scored row a gradient whatever the (random model's) rewards
        try (Trainer t = Trainer.open(config(model), TrainerEndToEndTest.QUIET)) {
            Policies.Policy p = t.policiesForTest().get("policy");
            assertEquals(BuiltinTokenizer.VOCAB_SIZE, p.vocabLimit(), "the tokenizer's ids, not the head's rows");
            t.train();
            try (PointerScope scope = new PointerScope()) {
                after = Tensors.toFloats(p.model().parameters().get("lm_head.weight"));
            }
        }
        int cut = BuiltinTokenizer.VOCAB_SIZE * hidden;
        assertArrayEquals(Arrays.copyOfRange(before, cut, before.length), Arrays.copyOfRange(after, cut, after.length),
                "the padding rows of the head");
        double moved = 0;
        for (int i = 0; i < cut; i++) moved = Math.max(moved, Math.abs(after[i] - before[i]));
        assertTrue(moved > 1e-5, "the tokenizer's rows moved: " + moved);
    }
}
