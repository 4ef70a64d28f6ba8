// ConfigException.java — a bad run configuration: says where (file:line, or the command-line
// override), which key (the full path, e.g. ppo.clip_low) and what is wrong, in one line, so that
// the CLI can print it as is.
package dev.drmas.config;

/**
 * An error in a run configuration. {@link #key()} is the key path it is about (null for YAML
 * syntax errors), {@link #problem()} what is wrong with it, {@link #origin()} where the value came
 * from ({@code configs/a.yaml:12}, {@code override 'ppo.clip_low=1.5'}), null when unknown (a
 * default, or a record built in code). Records of this package throw it with a key relative to
 * themselves; {@link Binder} re-throws it with the full path and the origin.
 */
public final class ConfigException extends IllegalArgumentException {
    private final String origin;
    private final String key;
    private final String problem;

    ConfigException(String origin, String key, String problem) {
        super(format(origin, key, problem));
        this.origin = origin;
        this.key = key;
        this.problem = problem;
    }

    /** A problem with {@code key}, as a record's constructor reports it (no origin yet). */
    public static ConfigException at(String key, String problem) {
        return new ConfigException(null, key, problem);
    }

    /** A problem in a file or an override that is not about one key (syntax, missing file). */
    static ConfigException in(String origin, String problem) {
        return new ConfigException(origin, null, problem);
    }

    private static String format(String origin, String key, String problem) {
        StringBuilder b = new StringBuilder();
        if (origin != null) b.append(origin).append(": ");
        if (key != null && !key.isEmpty()) b.append(key).append(": ");
        return b.append(problem).toString();
    }

    public String origin() {
        return origin;
    }

    public String key() {
        return key;
    }

    public String problem() {
        return problem;
    }
}
