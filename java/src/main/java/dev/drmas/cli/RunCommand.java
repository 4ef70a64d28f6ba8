// RunCommand.java — what `drmas train`, `drmas sft` and `drmas eval` share: a YAML run config with
// Hydra-style overrides, joining the other ranks of a data-parallel run (train, eval), and the translation of every bad-input exception of the layers below
// (config, task files, model and tokenizer files, settings the trainer refuses as it opens) into a
// clear user error.
package dev.drmas.cli;

import dev.drmas.config.ConfigException;
import dev.drmas.config.RunConfig;
import dev.drmas.dist.Collective;
import dev.drmas.dist.DistEnv;
import dev.drmas.dist.DistributedException;
import dev.drmas.env.TaskFileException;
import dev.drmas.model.ModelFileException;
import dev.drmas.tokenizer.TokenizerFileException;
import dev.drmas.train.RunLock;
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

    @Parameters(index = "1..*", paramLabel = "KEY=VALUE", description = "overrides of the config's keys (a.b=v sets, +a.b=v adds, ++a.b=v adds or sets, ~a.b back to its default), e.g. trainer.steps=10 (train), sft.steps=50 (sft), eval.tasks=20 (eval)")
    List<String> overrides = new ArrayList<>();

    RunConfig loadConfig() {
        return loadConfig(config, overrides);
    }

    static RunConfig loadConfig(Path config, List<String> overrides) {
        if (Files.isDirectory(config)) throw new UserError(config + ": is a folder, not a config file");
        if (!Files.isRegularFile(config)) throw new UserError(config + ": no such config file");
        RunConfig cfg;
        try {
            cfg = RunConfig.load(config, overrides);
        } catch (ConfigException e) {
            throw new UserError(e.getMessage(), e);
        }
        for (String w : cfg.warnings()) System.err.println("drmas: warning: " + w);
        return cfg;
    }

    /**
     * This process's collective: one rank of several when the torchrun variables (RANK, WORLD_SIZE,
     * MASTER_ADDR, MASTER_PORT) say so, which it then prints, else a single process. A variable that
     * does not parse, a port in use, a rank 0 out of reach or run.device cuda without CUDA is the
     * user's to change.
     */
    static Collective joinRanks(RunConfig cfg) {
        DistEnv env;
        Collective dist;
        try {
            env = DistEnv.fromEnvironment();
            dist = Trainer.connect(cfg, env);
        } catch (dev.drmas.dist.PortTakenException e) {
            // the port `drmas launch` picked was taken before this rank 0 could bind it: the launcher picks another
            boolean picked = "1".equals(System.getenv(LaunchCommand.PICKED_PORT_ENV));
            throw new UserError(e.getMessage(), e, picked ? LaunchCommand.PORT_TAKEN_STATUS : 1);
        } catch (IllegalArgumentException | DistributedException e) {
            throw new UserError(e.getMessage(), e);
        }
        if (env.distributed()) {
            System.out.println("drmas: rank " + env.rank() + " of " + env.worldSize() + " joined (master "
                    + env.masterAddr() + ":" + env.masterPort() + ")");
        }
        return dist;
    }

    /** Runs {@code body} with a trainer, turning bad input into user errors. */
    static int withTrainer(RunConfig cfg, PrintStream out, TrainerBody body) throws Exception {
        return withTrainer(cfg, out, Collective.single(), body);
    }

    /**
     * As above, as one rank of {@code dist}. Rank 0 holds the run folder's lock (RunLock) for the
     * whole body: a second process on the same folder stops before it writes anything.
     */
    static int withTrainer(RunConfig cfg, PrintStream out, Collective dist, TrainerBody body) throws Exception {
        try (RunLock lock = dist.isMaster() ? lock(cfg, dist) : null; Trainer t = open(cfg, out, dist)) {
            body.run(t);
            return t.stopStatus();  // 143 (130) where SIGTERM (SIGINT) stopped training after its save, as schedulers read it
        } catch (ConfigException | TaskFileException | ModelFileException | TokenizerFileException e) {
            throw new UserError(e.getMessage(), e);
        }
    }

    /**
     * The trainer of {@code cfg}. While it opens, an IllegalArgumentException is a setting that cannot
     * work (run.resume naming no checkpoint, rollout lengths
     * past the model's positions, run.device cuda without CUDA): the user's to change, exit 1.
     */
    static Trainer open(RunConfig cfg, PrintStream out, Collective dist) {
        try {
            return Trainer.open(cfg, out, dist);
        } catch (IllegalArgumentException e) {
            throw new UserError(e.getMessage(), e);
        }
    }

    /** The run folder's lock for this command; a folder in use or not writable is a user error. */
    static RunLock lock(RunConfig cfg) {
        try {
            return RunLock.acquire(cfg.run().runDir(), "drmas " + commandName());
        } catch (RunLock.RunFolderException e) {
            throw new UserError(e.getMessage(), e);
        }
    }

    /**
     * Rank 0's lock of the run folder: when it is taken (another run) the other ranks, already opening
     * their trainers, stop at their first ready point with this reason (Collective.announceFailure).
     */
    private static RunLock lock(RunConfig cfg, Collective dist) {
        try {
            return lock(cfg);
        } catch (UserError e) {
            dist.announceFailure("locking the run folder", e);
            throw e;
        }
    }

    /** This process's command line after the main class ("train run.yaml trainer.steps=3"), for the lock file. */
    static String commandName() {
        String[] args = ProcessHandle.current().info().arguments().orElse(new String[0]);
        // the JDK leaves arguments() empty when the command line is longer than ~4 KB (a long
        // class path); Linux has it whole in /proc/self/cmdline, NUL-separated
        if (args.length == 0) {
            try {
                String all = java.nio.file.Files.readString(java.nio.file.Path.of("/proc/self/cmdline"));
                args = all.split("\0");
            } catch (java.io.IOException | RuntimeException e) {
                args = new String[0];
            }
        }
        for (int i = 0; i < args.length; i++) {
            if (args[i].equals(Main.class.getName())) return String.join(" ", java.util.Arrays.copyOfRange(args, i + 1, args.length));
        }
        return "(in-process)";
    }

    interface TrainerBody {
        void run(Trainer t) throws Exception;
    }
}
