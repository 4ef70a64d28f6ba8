// TrainCommand.java — `drmas train CONFIG [key=value ...]`: multi-agent RL as configured; resumes
// the run's latest checkpoint (run.resume: auto), logs to the run directory.
package dev.drmas.cli;

import picocli.CommandLine.Command;

@Command(name = "train", mixinStandardHelpOptions = true,
        description = {"Train the agents of CONFIG with reinforcement learning (Dr. MAS or GRPO advantages, PPO updates).",
                "Writes config.yaml, metrics.jsonl, TensorBoard events and checkpoints under run.output_dir/run.name."})
final class TrainCommand extends RunCommand {
    @Override
    public Integer call() throws Exception {
        var cfg = loadConfig();
        return withTrainer(cfg, System.out, t -> {
            t.train();
            System.out.println("drmas: run directory " + t.runDir().toAbsolutePath());
        });
    }
}
