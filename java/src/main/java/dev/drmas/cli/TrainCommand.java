// TrainCommand.java — `drmas train CONFIG [key=value ...]`: multi-agent RL as configured; resumes
// the run's latest checkpoint (run.resume: auto), logs to the run directory. As one rank of a
// data-parallel run when the torchrun variables (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) say so.
package dev.drmas.cli;

import dev.drmas.dist.Collective;
import dev.drmas.train.Trainer;
import picocli.CommandLine.Command;

@Command(name = "train", mixinStandardHelpOptions = true,
        description = {"Train the agents of CONFIG with reinforcement learning (Dr. MAS or GRPO advantages, PPO updates).",
                "Writes config.yaml, metrics.jsonl, TensorBoard events and checkpoints under run.output_dir/run.name."})
final class TrainCommand extends RunCommand {
    @Override
    public Integer call() throws Exception {
        LaunchCommand.watchLauncher();
        var cfg = loadConfig();
        try (Collective dist = joinRanks(cfg)) {
            try {
                Trainer.requireTaskPerRank(cfg, dist.worldSize());  // before the models load (every rank alike)
            } catch (IllegalArgumentException e) {
                throw new UserError(e.getMessage(), e);
            }
            return withTrainer(cfg, System.out, dist, t -> {
                t.train();
                if (dist.isMaster()) System.out.println("drmas: run directory " + t.runDir().toAbsolutePath());
            });
        }
    }
}
