// ChildJvm.java — the start of a command line that runs this JVM again as a child process: its
// java binary, the input arguments a caller keeps (native access, -D properties, memory flags) and
// its class path. `drmas launch` (ranks), `drmas experiment`, TrainStepBench and
// MemoryPlanCheckTest (one JVM per measured configuration) add their own options and main class.
package dev.drmas.cli;

import java.lang.management.ManagementFactory;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Predicate;

public final class ChildJvm {
    private ChildJvm() {
    }

    /** java, this JVM's input arguments that {@code keep} accepts, -cp and its class path; a mutable list. */
    public static List<String> command(Predicate<String> keep) {
        List<String> cmd = new ArrayList<>();
        cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        for (String a : ManagementFactory.getRuntimeMXBean().getInputArguments()) {
            if (keep.test(a)) cmd.add(a);
        }
        cmd.add("-cp");
        cmd.add(System.getProperty("java.class.path"));
        return cmd;
    }
}
