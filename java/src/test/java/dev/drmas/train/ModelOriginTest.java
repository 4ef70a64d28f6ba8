// ModelOriginTest.java — where Policies.open takes each model's weights from: a warm start before the
// model's path (and then the KL reference is the warm start too), a warm start refused when it was
// trained for another model (tokenizer or shape), random weights of the path's shape under init:
// random, and a tokenizer with ids past the model's embedding rows refused at open, naming the model.
package dev.drmas.train;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.config.ConfigException;
import dev.drmas.config.RunConfig;
import dev.drmas.model.CausalLm;
import dev.drmas.model.Family;
import dev.drmas.model.ModelConfig;
import dev.drmas.model.Tensors;
import dev.drmas.tokenizer.BuiltinTokenizer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.bytedeco.javacpp.PointerScope;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class ModelOriginTest {
    @TempDir
    Path tmp;

    RunConfig config(String... overrides) {
        List<String> o = new ArrayList<>(List.of("run.output_dir=" + tmp.resolve("out"), "rollout.max_prompt_tokens=200",
                "rollout.max_new_tokens=3", "++ppo.reference_model=true"));
        o.addAll(List.of(overrides));
        return RunConfig.parse(TrainerEndToEndTest.YAML, o);
    }

    static float[] embedding(CausalLm m) {
        try (PointerScope scope = new PointerScope()) {
            return Tensors.toFloats(m.parameters().get("model.embed_tokens.weight"));
        }
    }

    /** A warm start of {@code c} with other weights than any folder here (seed 99), and the tokenizer files of {@code tokDir}. */
    static Path warmStart(Path sftDir, ModelConfig c, Path tokDir) throws Exception {
        Path dir = sftDir.resolve("policy");
        try (CausalLm m = CausalLm.random(c, 99)) {
            m.save(dir);
        }
        for (String f : List.of("tokenizer.json", "tokenizer_config.json")) {
            if (Files.isRegularFile(tokDir.resolve(f))) Files.copy(tokDir.resolve(f), dir.resolve(f));
        }
        return dir;
    }

    @Test
    void aModelWithAPathStartsFromItsWarmStartAndItIsTheReference() throws Exception {
        Path model = ChatTemplateKwargsTest.qwen3Folder(tmp.resolve("m"));
        Path sft = tmp.resolve("sft");
        Path warm = warmStart(sft, ModelConfig.read(model.resolve("config.json")), model);
        float[] want = embedding(CausalLm.load(warm)), path = embedding(CausalLm.load(model));
        RunConfig cfg = config("models.policy.path=" + model);
        Path runDir = tmp.resolve("run");
        try (Policies ps = Policies.open(cfg, runDir, null, sft)) {
            var p = ps.get("policy");
            assertArrayEquals(want, embedding(p.model()), "the warm start's weights, not the path's");
            assertFalse(java.util.Arrays.equals(want, path));
            assertArrayEquals(want, embedding(p.reference()), "the KL reference: the weights RL starts from");
            assertTrue(ps.origin.contains("policy: warm start " + warm), ps.origin);
            assertEquals(model, p.tokenizerDir(), "the tokenizer still the path's");
            // a resume reloads the reference from the run folder, where the first checkpoint writes it
            ps.saveReferences(runDir);
            assertArrayEquals(want, embedding(CausalLm.load(Policies.referenceDir(runDir, "policy"))));
        }
        // without a warm start, the path's weights, and no copy of them in the run folder
        Path runDir2 = tmp.resolve("run2");
        Files.createDirectories(Policies.referenceDir(runDir2, "policy"));  // a stale one, of an earlier start
        try (Policies ps = Policies.open(cfg, runDir2, null, tmp.resolve("none"))) {
            assertArrayEquals(path, embedding(ps.get("policy").model()));
            assertArrayEquals(path, embedding(ps.get("policy").reference()));
            ps.saveReferences(runDir2);
            assertFalse(Files.exists(Policies.referenceDir(runDir2, "policy")));
        }
    }

    @Test
    void aResumedRunKeepsTheWarmStartAsTheReferenceOfAModelWithAPath() throws Exception {
        Path model = ChatTemplateKwargsTest.qwen3Folder(tmp.resolve("m"));
        RunConfig cfg = config("models.policy.path=" + model, "run.name=r", "trainer.steps=1", "trainer.save_freq=1",
                "trainer.eval_freq=0", "rollout.tasks_per_step=1", "rollout.rollouts_per_task=2", "ppo.mini_batch_size=2",
                "ppo.micro_batch_size=2");
        Path warm = warmStart(WarmStart.weights(cfg.run().runDir()), ModelConfig.read(model.resolve("config.json")), model);
        float[] want = embedding(CausalLm.load(warm));
        try (Trainer t = Trainer.open(cfg, TrainerEndToEndTest.QUIET)) {
            t.train();
        }
        try (Trainer t = Trainer.open(cfg.withOverrides(List.of("trainer.steps=2")), TrainerEndToEndTest.QUIET)) {
            assertEquals(1, t.step(), "resumed");
            assertArrayEquals(want, embedding(t.policiesForTest().get("policy").reference()), "the warm start, not the path's weights");
        }
    }

    @Test
    void aWarmStartedModelsFolderMayMoveToOtherWeightsOnResume() throws Exception {
        // its KL reference is the run's reference/<id> copy, not the folder: the moved folder's weights were compared with
        // the old folder's as if the reference were reloaded from there, and other weights refused the resume
        Path model = ChatTemplateKwargsTest.qwen3Folder(tmp.resolve("m"));
        List<String> common = List.of("run.name=r", "trainer.steps=1", "trainer.save_freq=1", "trainer.eval_freq=0",
                "rollout.tasks_per_step=1", "rollout.rollouts_per_task=2", "ppo.mini_batch_size=2", "ppo.micro_batch_size=2");
        List<String> o = new ArrayList<>(common);
        o.add("models.policy.path=" + model);
        RunConfig cfg = config(o.toArray(String[]::new));
        Path warm = warmStart(WarmStart.weights(cfg.run().runDir()), ModelConfig.read(model.resolve("config.json")), model);
        float[] want = embedding(CausalLm.load(warm));
        try (Trainer t = Trainer.open(cfg, TrainerEndToEndTest.QUIET)) {
            t.train();
        }
        // the same model's tokenizer and shape, other weights (the last bytes of its weight file changed)
        Path moved = tmp.resolve("scratch/m");
        MovedModelFolderTest.copy(model, moved);
        Path w = moved.resolve("model.safetensors");
        byte[] bytes = Files.readAllBytes(w);
        for (int i = bytes.length - 16; i < bytes.length; i++) bytes[i] ^= 0x10;
        Files.write(w, bytes);
        var log = new java.io.ByteArrayOutputStream();
        List<String> o2 = new ArrayList<>(common);
        o2.addAll(List.of("models.policy.path=" + moved, "trainer.steps=2"));
        try (Trainer t = Trainer.open(config(o2.toArray(String[]::new)), new java.io.PrintStream(log, true, java.nio.charset.StandardCharsets.UTF_8))) {
            assertEquals(1, t.step(), "resumed");
            assertArrayEquals(want, embedding(t.policiesForTest().get("policy").reference()), "the warm start, kept in the run folder");
            t.train();
            assertEquals(2, t.step());
        }
        String said = log.toString(java.nio.charset.StandardCharsets.UTF_8);
        assertTrue(said.contains("resuming with changed settings: models.policy.path: " + model + " -> " + moved), said);
        assertFalse(said.contains("the KL reference is now read from"), said);
    }

    @Test
    void aKlReferenceTurnedOnAtResumeIsNotThePathForAWarmStartedModel() throws Exception {
        // found by a review: the run started from its warm start without ppo.reference_model, so no reference/<id>
        // copy exists; on resume with it on, the path's weights stood in silently (the KL pulled toward the base model)
        Path model = ChatTemplateKwargsTest.qwen3Folder(tmp.resolve("m"));
        List<String> o = new java.util.ArrayList<>(List.of("run.output_dir=" + tmp.resolve("out"), "rollout.max_prompt_tokens=200",
                "rollout.max_new_tokens=3", "++ppo.reference_model=false", "models.policy.path=" + model, "run.name=r", "trainer.steps=1",
                "trainer.save_freq=1", "trainer.eval_freq=0", "rollout.tasks_per_step=1", "rollout.rollouts_per_task=2",
                "ppo.mini_batch_size=2", "ppo.micro_batch_size=2"));
        RunConfig cfg = RunConfig.parse(TrainerEndToEndTest.YAML, o);
        warmStart(WarmStart.weights(cfg.run().runDir()), ModelConfig.read(model.resolve("config.json")), model);
        try (Trainer t = Trainer.open(cfg, TrainerEndToEndTest.QUIET)) {
            t.train();
        }
        try (Trainer t = Trainer.open(cfg.withOverrides(List.of("trainer.steps=2", "ppo.reference_model=true")), TrainerEndToEndTest.QUIET)) {
            assertEquals(1, t.step());
            assertEquals(null, t.policiesForTest().get("policy").reference(), "no reference rather than the path's weights");
            var e = assertThrows(dev.drmas.config.ConfigException.class, t::train);
            assertTrue(e.getMessage().contains("the KL reference of model 'policy' is missing")
                    && e.getMessage().contains("it started from its warm start"), e.getMessage());
        }
    }

    @Test
    void aWarmStartOfAnotherTokenizerIsRefused() throws Exception {
        Path qwen = ChatTemplateKwargsTest.qwen3Folder(tmp.resolve("m"));
        Path sft = tmp.resolve("sft");
        // the built-in tokenizer's model (models.policy.family/size of the YAML) given a warm start trained with Qwen3's
        RunConfig cfg = config();
        ModelConfig shape = cfg.models().get("policy").toModelConfig(BuiltinTokenizer.VOCAB_SIZE, List.of());
        Path warm = warmStart(sft, shape, qwen);
        var e = assertThrows(ConfigException.class, () -> Policies.open(cfg, tmp.resolve("run"), null, sft).close());
        String m = e.getMessage();
        assertTrue(m.startsWith("models.policy: its warm start " + warm + " was trained for another model than models.policy.family/size "
                + "with the built-in tokenizer: tokenizer.json differs from "), m);
        assertTrue(m.contains("; tokenizer_config.json differs from "), m);
        assertTrue(m.contains("delete " + warm + " and run `drmas sft` again, or point run.warm_start"), m);
    }

    @Test
    void aWarmStartOfAnotherShapeIsRefused() throws Exception {
        Path sft = tmp.resolve("sft"), tok = tmp.resolve("tok");
        BuiltinTokenizer.writeTo(tok);
        RunConfig cfg = config();
        // trained as llama with 2 layers; the config now says qwen3 with 1
        ModelConfig shape = RunConfig.parse(TrainerEndToEndTest.YAML, List.of("models.policy.family=llama", "models.policy.size.layers=2"))
                .models().get("policy").toModelConfig(BuiltinTokenizer.VOCAB_SIZE, List.of());
        Path warm = warmStart(sft, shape, tok);
        var e = assertThrows(ConfigException.class, () -> Policies.open(cfg, tmp.resolve("run"), null, sft).close());
        assertTrue(e.getMessage().contains(warm + " was trained for another model than models.policy.family/size with the built-in "
                + "tokenizer: family llama where the model has qwen3; num_hidden_layers 2 where the model has 1. "), e.getMessage());
        // the same shape and tokenizer load, the tokenizer.json written with its keys in another order (as another JVM writes
        // the built-in one)
        Path sft2 = tmp.resolve("sft2");
        Path w2 = warmStart(sft2, cfg.models().get("policy").toModelConfig(BuiltinTokenizer.VOCAB_SIZE, List.of()), tok);
        var json = new com.fasterxml.jackson.databind.ObjectMapper();
        var tree = (com.fasterxml.jackson.databind.node.ObjectNode) json.readTree(w2.resolve("tokenizer.json").toFile());
        var reversed = json.createObjectNode();
        List<String> keys = new ArrayList<>();
        tree.fieldNames().forEachRemaining(keys::add);
        for (String k : keys.reversed()) reversed.set(k, tree.get(k));
        json.writeValue(w2.resolve("tokenizer.json").toFile(), reversed);
        assertTrue(Files.mismatch(tok.resolve("tokenizer.json"), w2.resolve("tokenizer.json")) != -1);
        try (Policies ps = Policies.open(cfg, tmp.resolve("run"), null, sft2)) {
            assertTrue(ps.origin.contains("policy: warm start "), ps.origin);
        }
    }

    @Test
    void initRandomWithAPathHasTheFoldersShape() throws Exception {
        Path model = ChatTemplateKwargsTest.qwen3Folder(tmp.resolve("m"));  // qwen2, 64 x 2 (the YAML's size: qwen3, 32 x 1)
        ModelConfig folder = ModelConfig.read(model.resolve("config.json"));
        RunConfig cfg = config("models.policy.path=" + model, "++models.policy.init=random");
        try (Policies ps = Policies.open(cfg, tmp.resolve("run"), null, null)) {
            ModelConfig got = ps.get("policy").model().config();
            assertEquals(Family.QWEN2, got.family());
            assertEquals(folder.hiddenSize(), got.hiddenSize());
            assertEquals(folder.numLayers(), got.numLayers());
            assertEquals(folder.vocabSize(), got.vocabSize());
            assertEquals(java.util.Set.of("policy"), ps.randomInit);
            assertFalse(java.util.Arrays.equals(embedding(ps.get("policy").model()), embedding(CausalLm.load(model))), "random, not the folder's");
        }
    }

    @Test
    void aTokenizerPastTheEmbeddingRowsIsRefusedAtOpen() throws Exception {
        Path model = tmp.resolve("m");
        BuiltinTokenizer.writeTo(tmp.resolve("builtin"));
        try (CausalLm m = CausalLm.random(ModelConfig.tiny(Family.QWEN3, 300), 5)) {
            m.save(model);
        }
        Path qwen = ChatTemplateKwargsTest.qwen3Folder(tmp.resolve("q"));
        for (String f : List.of("tokenizer.json", "tokenizer_config.json")) Files.copy(qwen.resolve(f), model.resolve(f));
        int ids;
        try (var t = dev.drmas.tokenizer.HfTokenizer.load(model)) {
            ids = t.vocabSize();
        }
        RunConfig cfg = config("models.policy.path=" + model);
        var e = assertThrows(ConfigException.class, () -> Policies.open(cfg, tmp.resolve("run"), null, null).close());
        assertEquals("models.policy: its tokenizer (" + model.resolve("tokenizer.json") + ") has " + ids + " ids, but the model has 300 "
                + "(vocab_size in " + model.resolve("config.json") + "): ids from 300 up have no embedding, so the tokenizer is not "
                + "this model's; give the model the folder its tokenizer came with", e.getMessage());
    }
}
