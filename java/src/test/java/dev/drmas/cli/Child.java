// Child.java — runs the `drmas` command line in a child JVM (this JVM's java, flags and class path,
// as `drmas launch` starts its ranks), through bash when a test needs the shell to arrange the
// process first: closed descriptors (<&-, >&-), a file size limit (ulimit -f), a redirect to a
// device. For the robustness tests, whose cases are about real processes and real descriptors.
package dev.drmas.cli;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

final class Child {
    private Child() {
    }

    record Result(int exit, String out, String err) {
    }

    /** The java command that runs Main with {@code args}. */
    static List<String> command(String... args) {
        List<String> cmd = LaunchCommand.javaCommand();
        cmd.addAll(List.of(args));
        return cmd;
    }

    /**
     * Runs {@code shellPrefix} (e.g. "ulimit -f 40;", or "" ) and then exec's the drmas command
     * with {@code shellRedirects} (e.g. "<&-", "> /dev/full") in bash; waits at most
     * {@code timeoutS} seconds. stdout and stderr are captured unless redirected.
     */
    static Result shell(Path dir, String shellPrefix, String shellRedirects, long timeoutS, String... args)
            throws IOException, InterruptedException {
        List<String> cmd = new ArrayList<>(List.of("bash", "-c", shellPrefix + " exec \"$@\" " + shellRedirects, "bash"));
        cmd.addAll(command(args));
        ProcessBuilder pb = new ProcessBuilder(cmd).directory(dir.toFile());
        Path out = dir.resolve(".child-out-" + System.nanoTime()), err = dir.resolve(".child-err-" + System.nanoTime());
        pb.redirectOutput(out.toFile()).redirectError(err.toFile());
        Process p = pb.start();
        if (!p.waitFor(timeoutS, TimeUnit.SECONDS)) {
            p.destroyForcibly().waitFor();
            throw new AssertionError("drmas " + String.join(" ", args) + " did not end within " + timeoutS + " s");
        }
        String o = java.nio.file.Files.readString(out, StandardCharsets.UTF_8), e = java.nio.file.Files.readString(err, StandardCharsets.UTF_8);
        java.nio.file.Files.deleteIfExists(out);
        java.nio.file.Files.deleteIfExists(err);
        return new Result(p.exitValue(), o, e);
    }
}
