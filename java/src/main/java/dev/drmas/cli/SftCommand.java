// SftCommand.java — `drmas sft CONFIG [key=value ...]`: the supervised warm start for models trained
// from scratch; its weights (run_dir/sft/models, and run_dir/sft/master: the fp32 masters of a model
// trained in mixed precision) become the starting point of `drmas train`.
package dev.drmas.cli;

import picocli.CommandLine.Command;

@Command(name = "sft", mixinStandardHelpOptions = true,
        description = {"Warm-start the models of CONFIG on demonstrations of the workflow (formats right, answers",
                "right with probability sft.correct_prob); writes run_dir/sft/models for `drmas train`."})
final class SftCommand extends RunCommand {
    @Override
    public Integer call() throws Exception {
        LaunchCommand.watchLauncher();  // a job of `drmas experiment` ends with it
        var cfg = loadConfig().withOverrides(java.util.List.of("run.resume=never"));
        return withTrainer(cfg, System.out, t -> {
            try {
                t.sft();
            } catch (IllegalArgumentException e) {  // the run folder has a warm start already: the user's to decide
                throw new UserError(e.getMessage(), e);
            }
        });
    }
}
