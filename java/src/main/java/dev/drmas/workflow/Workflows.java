// Workflows.java — the one registry of workflows: every Workflow that java.util.ServiceLoader finds
// on the class path (drmas's own in META-INF/services/dev.drmas.workflow.Workflow, and any user
// jar's), by name. It is also the catalog through which the config layer learns the workflows'
// option types (registered as a WorkflowSchema.Catalog service).
package dev.drmas.workflow;

import dev.drmas.agent.Agent;
import dev.drmas.config.AgentPrompts;
import dev.drmas.config.AgentSpec;
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
        return load(Workflow.class.getClassLoader(), System.err::println);
    }

    /**
     * The workflows {@code loader} finds. An entry that cannot be loaded (a provider class that is
     * not there, or whose constructor fails) is left out with a warning naming it, passed to
     * {@code warn}, so that the other workflows, drmas's own included, still work: otherwise one bad
     * line in a user jar's services file ended every command with a stack trace. A config that names
     * the left-out workflow then fails as an unknown workflow, after the warning.
     */
    static Map<String, Workflow> load(ClassLoader loader, java.util.function.Consumer<String> warn) {
        Map<String, Workflow> out = new TreeMap<>();
        java.util.Iterator<Workflow> it = ServiceLoader.load(Workflow.class, loader).iterator();
        // ServiceLoader moves past an entry that fails; the bound only guards against one that would not
        for (int errors = 0; errors < 100; ) {
            Workflow w;
            try {
                if (!it.hasNext()) break;
                w = it.next();
            } catch (java.util.ServiceConfigurationError e) {
                errors++;
                warn.accept("drmas: warning: a workflow could not be loaded and is left out: " + describe(e) + " (check META-INF/services/"
                        + Workflow.class.getName() + " in the jars and folders on DRMAS_CLASSPATH: each line names a public class "
                        + "implementing it, with a public no-argument constructor, that is in that jar or on DRMAS_CLASSPATH)");
                continue;
            }
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

    // the error's message and its causes', one line ("...: Provider org.example.X not found")
    private static String describe(Throwable e) {
        StringBuilder b = new StringBuilder(String.valueOf(e.getMessage()));
        for (Throwable c = e.getCause(); c != null && c != c.getCause(); c = c.getCause()) {
            b.append(": ").append(c.getClass().getSimpleName()).append(": ").append(c.getMessage());
        }
        return b.toString();
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
        Workload w = named(cfg.orchestra().name()).open(cfg, log);
        try {
            requirePrompts(cfg, w);
        } catch (RuntimeException e) {
            w.close();
            throw e;
        }
        return w;
    }

    /**
     * The config's agents[i].prompts are what the team's agents use: a workflow that builds its team
     * without {@link Roles} would drop them silently (the built-in ones all use Roles).
     */
    static void requirePrompts(RunConfig cfg, Workload w) {
        for (int i = 0; i < cfg.agents().size(); i++) {
            AgentSpec spec = cfg.agents().get(i);
            AgentPrompts p = spec.prompts();
            if (p.isEmpty() || !w.orchestra().team().has(spec.id())) continue;
            Agent a = w.orchestra().team().agent(spec.id());
            boolean applied = (p.system() == null || p.system().equals(a.systemPrompt()))
                    && (p.user() == null || p.user().equals(a.userTemplate().source()))
                    && (p.followUp() == null || a.followUpTemplate() != null && p.followUp().equals(a.followUpTemplate().source()));
            if (!applied) {
                throw new IllegalArgumentException("agents[" + i + "].prompts: workflow '" + cfg.orchestra().name() + "' does not give agent '"
                        + spec.id() + "' the config's prompts (a workflow applies them when it builds its team with dev.drmas.workflow.Roles)");
            }
        }
    }

    /** The workflows as the config layer sees them (a ServiceLoader provider: public, no-argument constructor). */
    public static final class Catalog implements WorkflowSchema.Catalog {
        @Override
        public List<? extends WorkflowSchema> workflows() {
            return all();
        }
    }
}
