// RunCommand.java — what `drmas train`, `drmas sft` and `drmas eval` share: a YAML run config with
// Hydra-style overrides, and the translation of every bad-input exception of the layers below
// (config, task files, model and tokenizer files) into a clear user error.
package dev.drmas.cli;

import dev.drmas.config.ConfigException;
import dev.drmas.config.RunConfig;
import dev.drmas.dist.Collective;
import dev.drmas.env.TaskFileException;
import dev.drmas.model.ModelFileException;
import dev.drmas.tokenizer.TokenizerFileException;
import dev.drmas.train.Trainer;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import picocli.CommandLine.Parameters;

abstract class RunCommand implements Callable<Integer> {
    @Parameters(index = "0", paramLabel = "CONFIG", description = "run configuration (YAML)")
    Path config;

    @Parameters(index = "1..*", paramLabel = "KEY=VALUE", description = "overrides, e.g. ppo.epochs=2 trainer.steps=10")
    List<String> overrides = new ArrayList<>();

    RunConfig loadConfig() {
        return loadConfig(config, overrides);
    }

    static RunConfig loadConfig(Path config, List<String> overrides) {
        if (!Files.isRegularFile(config)) throw new UserError(config + ": no such config file");
        try {
            return RunConfig.load(config, overrides);
        } catch (ConfigException e) {
            throw new UserError(e.getMessage(), e);
        }
    }

    /** Runs {@code body} with a trainer, turning bad input into user errors. */
    static int withTrainer(RunConfig cfg, PrintStream out, TrainerBody body) throws Exception {
        return withTrainer(cfg, out, Collective.single(), body);
    }

    /** As above, as one rank of {@code dist}. */
    static int withTrainer(RunConfig cfg, PrintStream out, Collective dist, TrainerBody body) throws Exception {
        try (Trainer t = Trainer.open(cfg, out, dist)) {
            body.run(t);
            return 0;
        } catch (ConfigException | TaskFileException | ModelFileException | TokenizerFileException e) {
            throw new UserError(e.getMessage(), e);
        }
    }

    interface TrainerBody {
        void run(Trainer t) throws Exception;
    }
}
