// Main.java — the `drmas` command: picocli subcommands over the trainer: demo (the main job),
// train / sft / eval (runs from a YAML config), launch (N local data-parallel ranks of train),
// experiment (modes × seeds from shared warm starts) and report (HTML with plots), normalize (advantages
// for a JSONL file of rollout rows), compare (GRPO vs Dr. MAS on a batch), tokenize and generate (check a tokenizer or a
// checkpoint by hand), info (which libdrmas and backend this machine uses) and plan (a run's memory
// per GPU, from its config alone), plus the commands that workflows bring (search: index).
package dev.drmas.cli;

import dev.drmas.env.TaskFileException;
import dev.drmas.workflow.Workflow;
import dev.drmas.workflow.Workflows;
import java.util.LinkedHashMap;
import java.util.Map;
import picocli.CommandLine.Command;
import picocli.CommandLine;

@Command(name = "drmas", mixinStandardHelpOptions = true, versionProvider = Main.Version.class,
        description = "Dr. MAS: stable reinforcement learning for multi-agent LLM systems.",
        subcommands = {DemoCommand.class, NormalizeCommand.class, CompareCommand.class, InfoCommand.class, TokenizeCommand.class,
                GenerateCommand.class, TrainCommand.class, LaunchCommand.class, SftCommand.class, EvalCommand.class,
                ExperimentCommand.class, ReportCommand.class, PlanCommand.class,
                CommandLine.HelpCommand.class})
public final class Main implements Runnable {

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    @CommandLine.Option(names = "--verbose", scope = CommandLine.ScopeType.INHERIT,
            description = "print the stack trace with an error (also: DRMAS_DEBUG=1)")
    boolean verbose;

    @Override
    public void run() {
        spec.commandLine().usage(System.err);
    }

    public static void main(String[] args) {
        StdStreams.install();  // before picocli wraps System.out
        String[] typed;
        try {
            typed = CommandArgs.recover(args);  // under LANG=C the JVM has turned non-ASCII characters into U+FFFD
        } catch (UserError e) {
            System.err.println("drmas: " + e.getMessage());
            System.exit(1);
            return;
        }
        int status = commandLine().execute(typed);
        try {
            StdStreams.flushOut();
        } catch (StdStreams.OutputFailure e) {
            System.err.println("drmas: " + e.getMessage());
            if (status == 0) status = 1;
        }
        System.exit(status);
    }

    /** Stack traces with error messages: DRMAS_DEBUG=1 in the environment, or --verbose. */
    static boolean verbose(String[] args) {
        String env = System.getenv("DRMAS_DEBUG");
        if (env != null && !env.isBlank() && !env.equals("0")) return true;
        for (String a : args) if (a.equals("--verbose")) return true;
        return false;
    }

    /** The configured picocli command line (also used by tests). */
    public static CommandLine commandLine() {
        CommandLine cl = new CommandLine(new Main());
        for (Workflow w : Workflows.all()) for (Object command : w.commands()) cl.addSubcommand(command);
        cl.setCaseInsensitiveEnumValuesAllowed(true);
        cl.getHelpSectionMap().put(CommandLine.Model.UsageMessageSpec.SECTION_KEY_COMMAND_LIST, Main::commandList);
        // A data or configuration error is a one-line message naming what and where, with its causes
        // (what was being done, then why), not a stack trace unless asked for.
        cl.setExecutionExceptionHandler((ex, cmd, parseResult) -> {
            var err = cmd.getErr();
            err.println("drmas " + cmd.getCommandName() + ": " + Errors.describe(ex));
            if (verbose(parseResult.originalArgs().toArray(String[]::new))) {
                ex.printStackTrace(err);
            } else if (!(ex instanceof UserError || ex instanceof TaskFileException || ex instanceof StdStreams.OutputFailure)) {
                err.println("drmas: (DRMAS_DEBUG=1 prints the stack trace)");
            }
            err.flush();
            if (ex instanceof UserError u) return u.status;
            return ex instanceof TaskFileException || ex instanceof StdStreams.OutputFailure ? 1 : 3;
        });
        return cl;
    }

    /**
     * The "Commands:" section of the help, each description whole. Picocli shows only a description's
     * first line there, and most of ours are one paragraph written over several lines (cut mid-sentence:
     * "LibTorch's build (CPU or CUDA),"); its wrapping also breaks inside words like config.json. Here the
     * lines are joined and wrapped between words, indented under the first as picocli does.
     */
    static String commandList(CommandLine.Help help) {
        Map<String, CommandLine.Help> subs = new LinkedHashMap<>();
        help.subcommands().forEach((name, h) -> {
            if (!h.commandSpec().usageMessage().hidden()) subs.put(name, h);
        });
        if (subs.isEmpty()) return "";
        int nameWidth = subs.keySet().stream().mapToInt(String::length).max().orElse(0);
        int column = 2 + nameWidth + 2;  // "  name  ": where a description starts
        int width = Math.max(column + 24, help.commandSpec().usageMessage().width()) - column;
        StringBuilder out = new StringBuilder();
        for (var e : subs.entrySet()) {
            var usage = e.getValue().commandSpec().usageMessage();
            String[] lines = usage.header().length > 0 ? usage.header() : usage.description();
            StringBuilder text = new StringBuilder();
            for (String l : lines) text.append(' ').append(help.colorScheme().text(String.format(l)).plainString());
            out.append("  ").append(e.getKey()).append(" ".repeat(column - 2 - e.getKey().length()));
            int used = 0;
            // continuation lines two further in, as picocli indents them
            String pad = System.lineSeparator() + " ".repeat(column + 2);
            int room = width;
            for (String word : text.toString().strip().split("\\s+")) {
                if (word.isEmpty()) continue;
                if (used > 0 && used + 1 + word.length() > room) {
                    out.append(pad);
                    used = 0;
                    room = width - 2;
                } else if (used > 0) {
                    out.append(' ');
                    used++;
                }
                out.append(word);
                used += word.length();
            }
            out.append(System.lineSeparator());
        }
        return out.toString();
    }

    static final class Version implements CommandLine.IVersionProvider {
        @Override
        public String[] getVersion() {
            return new String[] {"drmas 0.1.0"};
        }
    }
}
