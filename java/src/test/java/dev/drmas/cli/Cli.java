// Cli.java — runs the `drmas` command line in the test JVM and captures its exit code and its
// picocli output and error streams (and, where asked, the bytes written to System.out), for the CLI
// tests.
package dev.drmas.cli;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
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

    /** A run and the bytes it wrote to System.out (where `normalize` without -o writes its output). */
    record Captured(Run run, byte[] stdout) {
    }

    static Captured runCapturingStdout(String... args) {
        PrintStream saved = System.out;
        ByteArrayOutputStream captured = new ByteArrayOutputStream();
        System.setOut(new PrintStream(captured, true));
        try {
            return new Captured(run(args), captured.toByteArray());
        } finally {
            System.setOut(saved);
        }
    }
}
