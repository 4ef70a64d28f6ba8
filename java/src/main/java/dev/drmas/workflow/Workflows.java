// Workflows.java — the one registry of workflows: every Workflow that java.util.ServiceLoader finds
// on the class path (drmas's own in META-INF/services/dev.drmas.workflow.Workflow, and any user
// jar's), by name. It is also the catalog through which the config layer learns the workflows'
// option types (registered as a WorkflowSchema.Catalog service).
package dev.drmas.workflow;

import dev.drmas.config.RunConfig;
import dev.drmas.config.WorkflowSchema;
import java.io.PrintStream;
import java.util.List;
import java.util.Map;
import java.util.ServiceLoader;
import java.util.TreeMap;

public final class Workflows {
    private Workflows() {
    }

    // loaded once: the class path does not change while drmas runs; sorted for stable error messages
    private static final class Loaded {
        static final Map<String, Workflow> BY_NAME = load();
    }

    private static Map<String, Workflow> load() {
        Map<String, Workflow> out = new TreeMap<>();
        for (Workflow w : ServiceLoader.load(Workflow.class, Workflow.class.getClassLoader())) {
            Workflow before = out.putIfAbsent(w.name(), w);
            if (before != null) {
                // two workflows under one name would make configs ambiguous
                throw new IllegalStateException("two workflows are named '" + w.name() + "': " + before.getClass().getName()
                        + " and " + w.getClass().getName() + " (check META-INF/services/" + Workflow.class.getName()
                        + " of the jars on the class path)");
            }
        }
        return out;
    }

    /** Every workflow, sorted by name. */
    public static List<Workflow> all() {
        return List.copyOf(Loaded.BY_NAME.values());
    }

    /** Workflow names, sorted. */
    public static List<String> names() {
        return List.copyOf(Loaded.BY_NAME.keySet());
    }

    /** The workflow {@code name}; an error listing the known ones otherwise. */
    public static Workflow named(String name) {
        Workflow w = Loaded.BY_NAME.get(name);
        if (w == null) throw new IllegalArgumentException("orchestra.name: " + WorkflowSchema.unknown(name));
        return w;
    }

    /** The workload of {@code cfg}'s workflow. */
    public static Workload open(RunConfig cfg, PrintStream log) {
        return named(cfg.orchestra().name()).open(cfg, log);
    }

    /** The workflows as the config layer sees them (a ServiceLoader provider: public, no-argument constructor). */
    public static final class Catalog implements WorkflowSchema.Catalog {
        @Override
        public List<? extends WorkflowSchema> workflows() {
            return all();
        }
    }
}
