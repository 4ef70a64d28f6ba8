// OrchestraSettings.java — what a registered workflow is built from: the team and the workflow's
// own options as the config gives them (YAML scalars: numbers, strings, booleans), with typed
// readers whose errors name the workflow, the key and the valid choices.
package dev.drmas.agent;

import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.TreeSet;

public record OrchestraSettings(Team team, Map<String, Object> options) {
    public OrchestraSettings {
        Objects.requireNonNull(team, "team");
        options = Collections.unmodifiableMap(new LinkedHashMap<>(options == null ? Map.of() : options));
    }

    public OrchestraSettings(Team team) {
        this(team, Map.of());
    }

    /** Fails on an option the workflow does not know, so that a typo is not silently ignored. */
    public void requireKnown(String workflow, Set<String> known) {
        for (String key : options.keySet()) {
            if (!known.contains(key)) {
                throw new IllegalArgumentException("orchestra '" + workflow + "': unknown option '" + key
                        + "'; valid options: " + String.join(", ", new TreeSet<>(known)));
            }
        }
    }

    public int intOption(String workflow, String key, int fallback) {
        Object v = options.get(key);
        if (v == null) return fallback;
        if (v instanceof Integer || v instanceof Long || v instanceof Short || v instanceof Byte) {
            long l = ((Number) v).longValue();
            if (l == (int) l) return (int) l;
        } else if (v instanceof Number n && n.doubleValue() == Math.rint(n.doubleValue())
                && Math.abs(n.doubleValue()) <= Integer.MAX_VALUE) {
            return (int) n.doubleValue();
        } else if (v instanceof String s) {
            try {
                return Integer.parseInt(s.trim());
            } catch (NumberFormatException ignored) {
                // reported below with the key
            }
        }
        throw new IllegalArgumentException("orchestra '" + workflow + "': option '" + key + "' = '" + v
                + "' is not an integer");
    }

    public String stringOption(String workflow, String key, String fallback) {
        Object v = options.get(key);
        if (v == null) return fallback;
        if (v instanceof String s && !s.isBlank()) return s.trim();
        throw new IllegalArgumentException("orchestra '" + workflow + "': option '" + key + "' = '" + v
                + "' must be a non-empty string");
    }
}
