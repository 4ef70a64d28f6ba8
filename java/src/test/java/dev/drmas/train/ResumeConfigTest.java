// ResumeConfigTest.java — a checkpoint whose config.yaml this version of drmas cannot read whole: keys
// it does not know (written by another version: an upgrade between a preemption and the resume) are
// left out with a warning naming them, and the rest is still compared, so a changed seed is still
// refused; a config.yaml that cannot be read at all refuses the resume, naming the file. Before, either
// case fell back to comparing the model shapes alone, and a changed seed or data went through silently.
// Changes that leave the weights and the data position usable resume and are logged: the agents'
// prompts (shortened in the log) and data.data_source_field.
package dev.drmas.train;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
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
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class ResumeConfigTest {
    @TempDir
    Path tmp;

    RunConfig config(Path out, String... overrides) {
        List<String> o = new ArrayList<>(List.of("run.output_dir=" + out, "trainer.eval_freq=0", "ppo.epochs=1", "trainer.steps=2",
                "trainer.save_freq=2"));
        o.addAll(List.of(overrides));
        return RunConfig.parse(TrainerEndToEndTest.YAML, o);
    }

    /** A run trained to its checkpoint of step 2, whose config.yaml is returned. */
    Path trained(Path out) throws Exception {
        try (Trainer t = Trainer.open(config(out), TrainerEndToEndTest.QUIET)) {
            t.train();
        }
        Path f = out.resolve("e2e/checkpoints/step_000002").resolve(ResumeCheck.CONFIG_FILE);
        assertTrue(Files.isRegularFile(f));
        return f;
    }

    @Test
    void unknownKeysAreLeftOutAndTheRestIsStillCompared() throws Exception {
        Path out = tmp.resolve("a");
        Path f = trained(out);
        String yaml = Files.readString(f);
        assertTrue(yaml.contains("\nrun:\n"), yaml);
        Files.writeString(f, yaml.replace("\nrun:\n", "\nrun:\n  legacy_key: 1\n").replace("\nppo:\n", "\nppo:\n  old_knob: true\n"));
        // a changed seed is refused as ever
        var e = assertThrows(ConfigException.class, () -> {
            try (Trainer t = Trainer.open(config(out, "trainer.steps=3", "run.seed=7"), TrainerEndToEndTest.QUIET)) {
                t.train();
            }
        });
        assertTrue(e.getMessage().contains("run.seed: 3 at the checkpoint, 7 now"), e.getMessage());
        // the same config resumes, with a warning naming the keys left out
        var log = new ByteArrayOutputStream();
        try (Trainer t = Trainer.open(config(out, "trainer.steps=3"), new PrintStream(log, true, StandardCharsets.UTF_8))) {
            assertEquals(2, t.step());
            t.train();
            assertEquals(3, t.step());
        }
        String said = log.toString(StandardCharsets.UTF_8);
        assertTrue(said.contains("warning: " + f + " has keys this version of drmas does not know (run.legacy_key, ppo.old_knob)"), said);
    }

    /** Resumes the run in {@code out} (trained to step 2) with {@code overrides} to step 3; returns what it logged. */
    String resumedWith(Path out, String... overrides) throws Exception {
        List<String> o = new ArrayList<>(List.of("trainer.steps=3"));
        o.addAll(List.of(overrides));
        var log = new ByteArrayOutputStream();
        try (Trainer t = Trainer.open(config(out, o.toArray(String[]::new)), new PrintStream(log, true, StandardCharsets.UTF_8))) {
            assertEquals(2, t.step());
            t.train();
            assertEquals(3, t.step());
        }
        return log.toString(StandardCharsets.UTF_8);
    }

    @Test
    void changedPromptsResumeAndTheLogShortensThem() throws Exception {
        Path out = tmp.resolve("c");
        trained(out);
        // the weights do not depend on the prompts (a config given paper-shaped prompts after a first run without them)
        String said = resumedWith(out, "agents[0].prompts.system=\"You are a helpful assistant who checks every step of the "
                + "arithmetic twice before answering.\\nSecond line.\"", "agents[1].prompts.user='Check: {question}'");
        assertTrue(said.contains("agents[0].prompts.system: null -> \"You are a helpful assistant who checks every step of the ari…\" "
                + "(104 chars)"), said);
        assertTrue(said.contains("agents[1].prompts.user: null -> Check: {question}"), said);
        assertFalse(said.contains("Second line"), "a long prompt is not quoted whole: " + said);
    }

    @Test
    void aChangedDataSourceFieldResumes() throws Exception {
        Path out = tmp.resolve("d");
        trained(out);
        // it only labels evaluation metrics: the training tasks and their order stay as the data position counts them
        String said = resumedWith(out, "data.data_source_field=benchmark");
        assertTrue(said.contains("data.data_source_field: data_source -> benchmark"), said);
    }

    @Test
    void aConfigThatCannotBeReadRefusesTheResumeNamingIt() throws Exception {
        Path out = tmp.resolve("b");
        Path f = trained(out);
        Files.writeString(f, Files.readString(f).replace("\nrun:\n  name: e2e\n  seed: 3\n", "\nrun:\n  name: e2e\n  seed: three\n"));
        var e = assertThrows(ConfigException.class, () -> Trainer.open(config(out, "trainer.steps=3"), TrainerEndToEndTest.QUIET).close());
        assertTrue(e.getMessage().contains(f + ": cannot be read to compare with") && e.getMessage().contains("run.seed"), e.getMessage());
    }
}
