// ReportCommand.java — `drmas report RUN_OR_EXPERIMENT_DIR... [-o report.html]`: the HTML report
// (plots inline, also as files in plots/ beside it) of runs or of an experiment's runs.
package dev.drmas.cli;

import dev.drmas.metrics.RunReport;
import java.io.IOException;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

@Command(name = "report", mixinStandardHelpOptions = true,
        description = {"Write the report of runs or experiments: one HTML file with the plots inline (also as PNG and JSON",
                "files in plots/ beside it) and a summary table per mode over the seeds."})
final class ReportCommand implements Callable<Integer> {
    @Parameters(arity = "1..*", paramLabel = "DIR", description = "run folders (with metrics.jsonl) or experiment folders (holding runs)")
    List<Path> dirs;

    @Option(names = {"-o", "--out"}, paramLabel = "FILE.html", description = "default: report.html in the first DIR")
    Path out;

    @Override
    public Integer call() {
        Path html = out != null ? out : dirs.getFirst().resolve("report.html");
        try {
            System.out.println("drmas report: " + RunReport.write(dirs, html).toAbsolutePath());
        } catch (IllegalArgumentException e) {
            throw new UserError(e.getMessage(), e);
        } catch (IOException | java.io.UncheckedIOException e) {
            // a folder that cannot be read or written (full, read-only, a file where a folder goes) is the user's to fix
            throw new UserError("writing the report " + html, e);
        }
        return 0;
    }
}
