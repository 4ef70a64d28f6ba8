// TrainCommandTest.java — bad input to `drmas train` / `sft` / `eval` is a clear error with exit 1:
// an unknown key (with the nearest valid one), a wrong type, a malformed JSONL task file
// (file:line), a missing model directory, a model whose chat template fails (its file and line), a
// missing config file, run.resume naming no checkpoint.
package dev.drmas.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.model.CausalLm;
import dev.drmas.model.Family;
import dev.drmas.model.ModelConfig;
import dev.drmas.tokenizer.BuiltinTokenizer;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class TrainCommandTest {
    @TempDir
    Path dir;



    Path config(String yaml) throws Exception {
        Path p = dir.resolve("run.yaml");
        Files.writeString(p, yaml);
        return p;
    }

    void fails(Cli.Run r, String... parts) {
        assertEquals(1, r.exit(), r.err());
        for (String p : parts) assertTrue(r.err().contains(p), "'" + p + "' in: " + r.err());
    }

    @Test
    void unknownKeyNamesTheNearestValidKey() throws Exception {
        Path c = config("ppo:\n  clip_hgh: 0.3\n");
        fails(Cli.run("train", c.toString()), "run.yaml:2", "ppo.clip_hgh", "did you mean ppo.clip_high?");
        fails(Cli.run("train", config("run: {}\n").toString(), "trainer.stepz=3"), "trainer.stepz", "trainer.steps");
    }

    @Test
    void wrongTypeNamesTheKeyAndTheValue() throws Exception {
        fails(Cli.run("sft", config("ppo: {epochs: two}\n").toString()), "ppo.epochs", "integer", "two");
    }

    @Test
    void malformedTaskFileNamesFileAndLine() throws Exception {
        Path tasks = dir.resolve("train.jsonl");
        Files.writeString(tasks, "{\"question\": \"1+1?\", \"answer\": 2}\n{\"question\": \"2+2?\"}\n");
        Path c = config("run: {output_dir: " + dir.resolve("runs") + "}\ndata: {source: jsonl, train_file: " + tasks
                + "}\ntrainer: {eval_freq: 0}\n");
        fails(Cli.run("train", c.toString()), "train.jsonl:2", "answer");
    }

    @Test
    void missingModelDirectoryIsNamed() throws Exception {
        Path missing = dir.resolve("no-such-model");
        Path c = config("run: {output_dir: " + dir.resolve("runs") + "}\nmodels:\n  policy: {path: " + missing + "}\n");
        fails(Cli.run("eval", c.toString()), "no-such-model");
    }

    @Test
    void aModelWhoseChatTemplateFailsNamesTheFile() throws Exception {
        Path model = dir.resolve("model");
        try (CausalLm m = CausalLm.random(ModelConfig.tiny(Family.QWEN3, BuiltinTokenizer.VOCAB_SIZE), 3)) {
            m.save(model);
        }
        String run = "run: {output_dir: " + dir.resolve("runs") + "}\nrollout: {max_prompt_tokens: 128, max_new_tokens: 8}\n"
                + "models:\n  policy: {path: " + model + "}\n";
        TokenizeCommandTest.withTemplate(model, "{% for m in messages %}{{ m.content }}{% endfor %}\n{% if %}");
        fails(Cli.run("eval", config(run).toString()), model.resolve("tokenizer_config.json") + ": chat_template does not parse",
                "line 2:");
        TokenizeCommandTest.withTemplate(model, "{{ raise_exception('no user turns here') }}");
        fails(Cli.run("eval", config(run).toString()), model.resolve("tokenizer_config.json") + ": chat_template fails on",
                "no user turns here");
    }

    @Test
    void resumeFromAMissingCheckpointIsAUserError() throws Exception {
        Path missing = dir.resolve("no-such-checkpoint");
        Path c = config("run: {output_dir: " + dir.resolve("runs") + ", resume: " + missing + "}\n");
        fails(Cli.run("train", c.toString()), "run.resume: " + missing + " is not a checkpoint");
        // a keyword in other case is a path too (a folder may be called so), and the error says what was likely meant
        Path upper = config("run: {output_dir: " + dir.resolve("runs") + ", resume: AUTO}\n");
        fails(Cli.run("train", upper.toString()), "run.resume: AUTO is not a checkpoint (no trainer_state.json); the keywords are lower case"
                + " (auto, never): auto?");
    }

    @Test
    void missingConfigFile() {
        fails(Cli.run("train", dir.resolve("absent.yaml").toString()), "absent.yaml: no such config file");
    }
}
