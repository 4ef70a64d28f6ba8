// WorkflowSchema.java — what the config layer knows of a workflow: its name, the record types of
// the two sections whose keys belong to it, `orchestra.options` and `data.synthetic`, so that those
// keys are bound, defaulted, checked (with key paths and file:line) and written back like every
// other section, and the roles its agents may have, checked the same way. The workflows themselves live above this layer (dev.drmas.workflow); the config
// layer finds them through the one Catalog that drmas registers with java.util.ServiceLoader.
package dev.drmas.config;

import java.util.List;
import java.util.Map;
import java.util.ServiceLoader;
import java.util.TreeMap;

public interface WorkflowSchema {
    /** The name configs use in orchestra.name. */
    String name();

    /** The record of {@code orchestra.options}; it has a static {@code defaults()}. */
    Class<? extends Record> optionsType();

    /**
     * The record of {@code data.synthetic} (the workflow's built-in task generator, with a static
     * {@code defaults()}), or null when the workflow has none and its tasks come from JSONL only.
     */
    default Class<? extends Record> syntheticDataType() {
        return null;
    }

    /**
     * The roles of the agents a config that lists none gets, one agent per role (its id the
     * role), all on one model: math's solver and verifier, search's verifier, searcher, answerer.
     */
    List<String> defaultRoles();

    /**
     * The roles that {@code agents[i].role} may name under {@code options} (a record of
     * {@link #optionsType()}: a bound may depend on them), with how many agents each may have.
     * A config's agents are checked against them when it is bound, so that a bad role is an error
     * at its file:line or override before anything loads. Empty (the default): the workflow
     * declares none and checks its agents itself when it opens.
     */
    default List<RoleSpec> roles(Record options) {
        return List.of();
    }

    /**
     * The roles whose agents no episode calls under {@code options} (a record of {@link
     * #optionsType()}), each with why, in words that say which option lets them act (math with
     * max_loops 1: the verifier). `drmas train` and `drmas plan` warn of such agents, and of the
     * models none of whose agents act, which never train (IdleAgents). Empty (the default): every
     * role can act.
     */
    default Map<String, String> idleRoles(Record options) {
        return Map.of();
    }

    /**
     * The part of a config a {@link Typed} component is: the options or the synthetic data (of the
     * workflow's type), or the agents (whose default is one agent per default role).
     */
    enum Part { OPTIONS, SYNTHETIC_DATA, AGENTS }

    /** Marks a config record component whose record type is the workflow's (by orchestra.name). */
    @java.lang.annotation.Retention(java.lang.annotation.RetentionPolicy.RUNTIME)
    @java.lang.annotation.Target(java.lang.annotation.ElementType.RECORD_COMPONENT)
    @interface Typed {
        Part value();
    }

    /** Every workflow there is; drmas registers one implementation (the workflow registry). */
    interface Catalog {
        List<? extends WorkflowSchema> workflows();
    }

    /** The workflows on the class path by name, sorted. */
    static Map<String, WorkflowSchema> all() {
        Map<String, WorkflowSchema> out = new TreeMap<>();
        for (Catalog c : Catalogs.LOADED) for (WorkflowSchema w : c.workflows()) out.putIfAbsent(w.name(), w);
        return out;
    }

    /** The workflow named {@code name}, or null when there is none. */
    static WorkflowSchema find(String name) {
        return all().get(name);
    }

    /** The workflow named {@code name}; a ConfigException at orchestra.name listing the known ones otherwise. */
    static WorkflowSchema named(String name) {
        WorkflowSchema w = find(name);
        if (w == null) throw ConfigException.at("orchestra.name", unknown(name));
        return w;
    }

    /** Where a workflow that drmas does not ship comes from, for the error of a name it does not know. */
    String JAR_HINT = "a workflow of your own is found when its jar is on DRMAS_CLASSPATH, listed in the jar's META-INF/services/"
            + "dev.drmas.workflow.Workflow";

    /** The problem of an unknown workflow name: the nearest and all known names. */
    static String unknown(String name) {
        var names = all().keySet();
        return "unknown workflow '" + name + "'" + KeyPaths.didYouMean(name, names) + "; known workflows: " + String.join(", ", names)
                + " (" + JAR_HINT + ")";
    }

    /** The catalogs, loaded once (the class path does not change while a run goes on). */
    final class Catalogs {
        static final List<Catalog> LOADED = ServiceLoader.load(Catalog.class, WorkflowSchema.class.getClassLoader())
                .stream().map(ServiceLoader.Provider::get).map(Catalog.class::cast).toList();

        private Catalogs() {
        }
    }
}
