// Cli.java — runs the `drmas` command line in the test JVM and captures its exit code and its
// picocli output and error streams, for the CLI tests.
package dev.drmas.cli;

import java.io.PrintWriter;
import java.io.StringWriter;

final class Cli {
    private Cli() {
    }

    record Run(int exit, String out, String err) {
    }

    static Run run(String... args) {
        StringWriter out = new StringWriter(), err = new StringWriter();
        var cl = Main.commandLine();
        cl.setOut(new PrintWriter(out));
        cl.setErr(new PrintWriter(err));
        int code = cl.execute(args);
        return new Run(code, out.toString(), err.toString());
    }
}
