// NormalizeCommand.java — `drmas normalize`: advantages for a JSONL file of rollout rows, so
// that users can check the normalisation on their own data. Each output line is the input
// object plus "advantage", in input order; any bad line stops the command before output.
package dev.drmas.cli;

import dev.drmas.algo.AdvantageSummary;
import dev.drmas.algo.Advantages;
import dev.drmas.algo.GlobalPooling;
import dev.drmas.algo.NormConfig;
import dev.drmas.algo.NormMode;
import dev.drmas.algo.SingletonPolicy;
import dev.drmas.bindings.DrmasException;
import java.io.BufferedWriter;
import java.io.IOException;
import java.io.OutputStreamWriter;
import java.io.PrintStream;
import java.io.Writer;
import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.Locale;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

@Command(name = "normalize", mixinStandardHelpOptions = true,
        description = {"Compute advantages for rollout rows (JSONL: uid, traj, agent, score per line).",
                "Writes each row plus \"advantage\", in input order, to stdout (or --output).",
                "traj identifies a trajectory within its uid."})
final class NormalizeCommand implements Callable<Integer> {

    @Option(names = "--mode", required = true, paramLabel = "MODE", description = "drmas | grpo | agent-mean | agent-std")
    String mode;

    @Option(names = "--global-pooling", defaultValue = "trajectories", paramLabel = "P",
            description = "trajectories (default) | rows: what the group statistics pool over")
    String pooling;

    @Option(names = "--eps", defaultValue = "1e-6", paramLabel = "E", description = "added to the std (default ${DEFAULT-VALUE})")
    double eps;

    @Option(names = "--singleton", defaultValue = "fallback", paramLabel = "POLICY",
            description = "fallback (default) | zero | raw: single-member segments")
    String singleton;

    @Option(names = "--biased-std", description = "std with n instead of n - 1")
    boolean biasedStd;

    @Option(names = "--no-std", description = "only subtract the mean (Dr. GRPO style)")
    boolean noStd;

    @Option(names = {"-o", "--output"}, paramLabel = "OUT.jsonl", description = "write here instead of stdout (a regular file is replaced whole: written beside it, then renamed)")
    Path output;

    @Option(names = "--summary", description = "print per-agent statistics to stderr")
    boolean summary;

    @Parameters(index = "0", paramLabel = "IN.jsonl", description = "input rows, or - for stdin")
    Path input;

    NormConfig config() {
        try {
            return new NormConfig(NormMode.parse(mode), GlobalPooling.parse(pooling), SingletonPolicy.parse(singleton),
                    !biasedStd, !noStd, eps);
        } catch (IllegalArgumentException e) {
            throw new UserError(e.getMessage());
        }
    }

    @Override
    public Integer call() throws IOException {
        NormConfig cfg = config();
        ScoredRows rows = ScoredRows.read(input);
        Advantages.Result r;
        try {
            r = Advantages.computeWithDiagnostics(cfg, rows.scores, rows.uid, rows.traj, rows.agent,
                    rows.numUids, rows.numTrajs, Math.max(1, rows.numAgents()));
        } catch (DrmasException e) {
            throw new UserError(rows.source + ": " + e.getMessage());
        }
        if (output == null) {
            // System.out throws on a failed write (StdStreams): a full disk or a closed pipe stops the command
            Writer w = new BufferedWriter(new OutputStreamWriter(System.out, StandardCharsets.UTF_8));
            write(rows, r.advantages(), w);
        } else {
            writeFile(output, rows, r.advantages());
        }
        if (summary) printSummary(System.err, cfg, rows, r);
        return 0;
    }

    static void write(ScoredRows rows, float[] adv, Writer w) throws IOException {
        for (int i = 0; i < rows.size(); i++) {
            // the float's shortest decimal form, exactly as the kernel produced it
            rows.objects.get(i).put("advantage", new BigDecimal(Float.toString(adv[i])));
            w.write(ScoredRows.JSON.writeValueAsString(rows.objects.get(i)));
            w.write('\n');
        }
        w.flush();
    }

    /** The rows with their advantages to {@code out} (OutputFile: whole or not at all, devices written in place). */
    static void writeFile(Path out, ScoredRows rows, float[] adv) {
        OutputFile.write(out, os -> write(rows, adv, new BufferedWriter(new OutputStreamWriter(os, StandardCharsets.UTF_8))));
    }

    static void printSummary(PrintStream err, NormConfig cfg, ScoredRows rows, Advantages.Result r) {
        AdvantageSummary[] s = AdvantageSummary.perAgent(rows.scores, rows.agent, r.advantages(), r.diagnostics(),
                rows.numUids, rows.numAgents());
        err.printf(Locale.ROOT, "%s: %d rows, %d groups, %d trajectories, %d agents (mode %s, pooling %s)%n", rows.source,
                rows.size(), rows.numUids, rows.numTrajs, rows.numAgents(), cfg.mode().configName(), cfg.globalPooling().configName());
        err.printf(Locale.ROOT, "  %-12s %7s %10s %10s %10s %15s %15s%n", "agent", "rows", "score", "adv mean", "E[adv^2]",
                "inflation mean", "inflation max");
        for (AdvantageSummary a : s) {
            err.printf(Locale.ROOT, "  %-12s %7d %10.4f %10.4f %10.4f %15.4f %15.4f%n", rows.agentNames.get(a.agent()), a.rows(),
                    a.scoreMean(), a.advantageMean(), a.advantageSecondMoment(), a.inflationMean(), a.inflationMax());
        }
    }
}
