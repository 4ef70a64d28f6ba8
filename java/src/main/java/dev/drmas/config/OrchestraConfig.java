// OrchestraConfig.java — `orchestra:`: which multi-agent workflow runs (a name the workflow registry
// knows: math, search, proposer-aggregator, or one on the class path) and that workflow's own
// options, a record of the workflow's type bound like any other section (defaults, key-path errors,
// written back in full to the run's config.yaml).
package dev.drmas.config;

/**
 * @param name    the workflow; default {@code math}
 * @param options the workflow's options ({@code orchestra.options.*}; each workflow documents its
 *                keys in its options record and in the README)
 */
public record OrchestraConfig(String name, @WorkflowSchema.Typed(WorkflowSchema.Part.OPTIONS) Record options) {
    /** The workflow of a config that names none. */
    public static final String DEFAULT_WORKFLOW = "math";

    public OrchestraConfig {
        Check.notBlank(name, "name");
        WorkflowSchema w = WorkflowSchema.named(name);
        Check.given(options, "options");
        Check.that(w.optionsType().isInstance(options), "options", "is a " + options.getClass().getSimpleName()
                + ", but workflow '" + name + "' takes " + w.optionsType().getSimpleName());
    }

    /** The workflow {@code name} with its default options. */
    public static OrchestraConfig of(String name) {
        return new OrchestraConfig(name, Binder.defaultsOf(WorkflowSchema.named(name).optionsType()));
    }

    public static OrchestraConfig defaults() {
        return of(DEFAULT_WORKFLOW);
    }

    /** The options as the workflow's record type (a workflow reads its own options with this). */
    public <T extends Record> T options(Class<T> type) {
        if (!type.isInstance(options)) {
            throw new IllegalStateException("orchestra.options of workflow '" + name + "' are a "
                    + options.getClass().getName() + ", not " + type.getName());
        }
        return type.cast(options);
    }
}
