// MovedModelFolderTest.java — resuming with models.id.path moved to another folder that holds the same
// model (a requeued job that stages the model to node-local scratch) goes on, logging the change, where
// it was refused as a changed model; a folder whose tokenizer differs from the checkpoint's copy is
// refused naming the file (the tokenizer is read from the folder on resume); with a KL reference, which
// is reloaded from the folder, weight files of other sizes are refused, and an old folder that is gone
// is said to be uncompared. Real training of a tiny HF-folder model on real files.
package dev.drmas.train;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.config.ConfigException;
import dev.drmas.config.RunConfig;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class MovedModelFolderTest {
    @TempDir
    Path tmp;

    RunConfig config(Path model, String... overrides) {
        List<String> o = new ArrayList<>(List.of("run.output_dir=" + tmp.resolve("out"), "models.policy.path=" + model,
                "trainer.eval_freq=0", "trainer.save_freq=1", "ppo.epochs=1"));
        o.addAll(List.of(overrides));
        return RunConfig.parse(TrainerEndToEndTest.YAML, o);
    }

    static void copy(Path from, Path to) throws Exception {
        Files.createDirectories(to);
        try (Stream<Path> s = Files.list(from)) {
            for (Path f : s.toList()) Files.copy(f, to.resolve(f.getFileName()));
        }
    }

    /** Trains one step from folder m1 (with {@code overrides}); returns m1. */
    Path trainedFrom(String... overrides) throws Exception {
        Path m1 = PathModelTest.folder(tmp.resolve("m1"));
        List<String> o = new ArrayList<>(List.of("trainer.steps=1"));
        o.addAll(List.of(overrides));
        try (Trainer t = Trainer.open(config(m1, o.toArray(String[]::new)), TrainerEndToEndTest.QUIET)) {
            t.train();
        }
        return m1;
    }

    String resume(Path model, String... overrides) throws Exception {
        List<String> o = new ArrayList<>(List.of("trainer.steps=2"));
        o.addAll(List.of(overrides));
        var log = new ByteArrayOutputStream();
        try (Trainer t = Trainer.open(config(model, o.toArray(String[]::new)), new PrintStream(log, true, StandardCharsets.UTF_8))) {
            assertEquals(1, t.step());
            t.train();
            assertEquals(2, t.step());
        }
        return log.toString(StandardCharsets.UTF_8);
    }

    @Test
    void theSameModelInAnotherFolderResumes() throws Exception {
        Path m1 = trainedFrom();
        Path m2 = tmp.resolve("scratch/m2");
        copy(m1, m2);
        String said = resume(m2);
        assertTrue(said.contains("resuming with changed settings: models.policy.path: " + m1 + " -> " + m2), said);
    }

    @Test
    void checkpointsCarryTheSlowTokenizersFilesToo() throws Exception {
        // AutoTokenizer(use_fast=False) and conversions from the slow tokenizer read these, not tokenizer.json
        Path m1 = PathModelTest.folder(tmp.resolve("m1"));
        Files.writeString(m1.resolve("vocab.json"), "{\"a\": 0}");
        Files.writeString(m1.resolve("merges.txt"), "#version: 0.2\n");
        Files.write(m1.resolve("tokenizer.model"), new byte[] {10, 3, 1, 2, 3});
        try (Trainer t = Trainer.open(config(m1, "trainer.steps=1"), TrainerEndToEndTest.QUIET)) {
            t.train();
        }
        Path saved = tmp.resolve("out/e2e/checkpoints/step_000001/models/policy");
        for (String f : List.of("vocab.json", "merges.txt", "tokenizer.model", "tokenizer.json")) {
            assertTrue(Files.isRegularFile(saved.resolve(f)), f + " in " + saved);
            assertEquals(-1L, Files.mismatch(m1.resolve(f), saved.resolve(f)), f);
        }
    }

    @Test
    void aFolderWithAnotherTokenizerIsRefusedNamingTheFile() throws Exception {
        Path m1 = trainedFrom();
        Path m2 = tmp.resolve("m2");
        copy(m1, m2);
        String tok = Files.readString(m2.resolve("tokenizer.json"));
        Files.writeString(m2.resolve("tokenizer.json"), tok.replaceFirst("\\}\\s*$", ", \"x\": 1}"));
        var e = assertThrows(ConfigException.class, () -> Trainer.open(config(m2, "trainer.steps=2"), TrainerEndToEndTest.QUIET).close());
        assertTrue(e.getMessage().contains("models.policy.path: " + m1 + " at the checkpoint, " + m2 + " now (its tokenizer.json differs"),
                e.getMessage());
    }

    @Test
    void aFolderWithOtherStopTokensIsRefused() throws Exception {
        Path m1 = trainedFrom();
        Path m2 = tmp.resolve("m2");
        copy(m1, m2);
        // generation_config.json's eos ids are the stop tokens the tokenizer reads from the folder
        Files.writeString(m2.resolve("generation_config.json"), "{\"eos_token_id\": [1, 2]}");
        var e = assertThrows(ConfigException.class, () -> Trainer.open(config(m2, "trainer.steps=2"), TrainerEndToEndTest.QUIET).close());
        assertTrue(e.getMessage().contains("(its generation_config.json differs"), e.getMessage());
    }

    @Test
    void withAKlReferenceTheWeightFilesMustMatchOrTheOldFolderBeGone() throws Exception {
        Path m1 = trainedFrom("ppo.reference_model=true", "ppo.kl_coef=0.01");
        // another model of the same shape and tokenizer (a fine-tuned copy): the same file sizes, other weights (the
        // last tensor's last values here)
        Path m3 = tmp.resolve("m3");
        copy(m1, m3);
        Path w = m3.resolve("model.safetensors");
        byte[] bytes = Files.readAllBytes(w);
        for (int i = bytes.length - 16; i < bytes.length; i++) bytes[i] ^= 0x10;
        Files.write(w, bytes);
        var e = assertThrows(ConfigException.class, () -> Trainer.open(config(m3, "trainer.steps=2", "ppo.reference_model=true",
                "ppo.kl_coef=0.01"), TrainerEndToEndTest.QUIET).close());
        assertTrue(e.getMessage().contains("its model.safetensors (the KL reference is reloaded from it) differs from " + m1), e.getMessage());
        // and weight files of other names or sizes
        Files.write(w, java.util.Arrays.copyOf(bytes, bytes.length + 8));
        e = assertThrows(ConfigException.class, () -> Trainer.open(config(m3, "trainer.steps=2", "ppo.reference_model=true",
                "ppo.kl_coef=0.01"), TrainerEndToEndTest.QUIET).close());
        assertTrue(e.getMessage().contains("its weight files (the KL reference is reloaded from it) differ from " + m1), e.getMessage());
        // a copy of the same files resumes; with the old folder gone it cannot be compared, and the log says so
        Path m2 = tmp.resolve("m2");
        copy(m1, m2);
        Checkpoints.deleteTree(m1);
        String said = resume(m2, "ppo.reference_model=true", "ppo.kl_coef=0.01");
        assertTrue(said.contains("warning: models.policy.path: the KL reference is now read from " + m2 + "; " + m1 + " is gone"), said);
    }
}
