// Main.java — the `drmas` command: picocli subcommands over the trainer: demo (the main job),
// train / sft / eval (runs from a YAML config), launch (N local data-parallel ranks of train),
// experiment (modes × seeds from shared warm starts) and report (HTML with plots), normalize (advantages
// for a JSONL file of rollout rows), compare (GRPO vs Dr. MAS on a batch), tokenize and generate (check a tokenizer or a
// checkpoint by hand) and info (which libdrmas and backend this machine uses), plus the commands
// that workflows bring (search: index).
package dev.drmas.cli;

import dev.drmas.env.TaskFileException;
import dev.drmas.workflow.Workflow;
import dev.drmas.workflow.Workflows;
import picocli.CommandLine.Command;
import picocli.CommandLine;

@Command(name = "drmas", mixinStandardHelpOptions = true, versionProvider = Main.Version.class,
        description = "Dr. MAS: stable reinforcement learning for multi-agent LLM systems.",
        subcommands = {DemoCommand.class, NormalizeCommand.class, CompareCommand.class, InfoCommand.class, TokenizeCommand.class,
                GenerateCommand.class, TrainCommand.class, LaunchCommand.class, SftCommand.class, EvalCommand.class,
                ExperimentCommand.class, ReportCommand.class,
                CommandLine.HelpCommand.class})
public final class Main implements Runnable {

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    @Override
    public void run() {
        spec.commandLine().usage(System.err);
    }

    public static void main(String[] args) {
        System.exit(commandLine().execute(args));
    }

    /** The configured picocli command line (also used by tests). */
    public static CommandLine commandLine() {
        CommandLine cl = new CommandLine(new Main());
        for (Workflow w : Workflows.all()) for (Object command : w.commands()) cl.addSubcommand(command);
        cl.setCaseInsensitiveEnumValuesAllowed(true);
        // A data or configuration error is a one-line message naming what and where, not a stack trace.
        cl.setExecutionExceptionHandler((ex, cmd, parseResult) -> {
            cmd.getErr().println("drmas " + cmd.getCommandName() + ": " + ex.getMessage());
            return ex instanceof UserError || ex instanceof TaskFileException ? 1 : 3;
        });
        return cl;
    }

    static final class Version implements CommandLine.IVersionProvider {
        @Override
        public String[] getVersion() {
            return new String[] {"drmas 0.1.0"};
        }
    }
}
