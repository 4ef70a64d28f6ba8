// Orchestras.java — the registry of workflows by name, so a config picks one ("math") and a new
// workflow is one class plus one register() call, with no change to the trainer.
package dev.drmas.agent;

import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.TreeMap;
import java.util.function.Function;

public final class Orchestras {
    // sorted, so that the error for an unknown name lists the choices in a stable order
    private static final Map<String, Function<OrchestraSettings, ? extends Orchestra>> REGISTRY = new TreeMap<>();

    static {
        register(MathOrchestra.NAME, MathOrchestra::fromSettings);
    }

    private Orchestras() {}

    /**
     * Registers a workflow; its factory builds it from the team and its options (and should
     * reject options it does not know). A name can be registered once: two workflows under one
     * name would make configs ambiguous.
     */
    public static synchronized void register(String name, Function<OrchestraSettings, ? extends Orchestra> factory) {
        Objects.requireNonNull(factory, "factory");
        if (name == null || name.isBlank()) throw new IllegalArgumentException("an orchestra needs a non-blank name");
        if (REGISTRY.containsKey(name)) {
            throw new IllegalArgumentException("an orchestra named '" + name + "' is already registered");
        }
        REGISTRY.put(name, factory);
    }

    /** The workflow registered as {@code name}, built for {@code settings}. */
    public static Orchestra create(String name, OrchestraSettings settings) {
        Function<OrchestraSettings, ? extends Orchestra> factory;
        synchronized (Orchestras.class) {
            factory = REGISTRY.get(name);
        }
        if (factory == null) {
            throw new IllegalArgumentException("unknown orchestra '" + name + "'; registered: " + String.join(", ", names()));
        }
        return factory.apply(settings);
    }

    /** Registered names, sorted. */
    public static synchronized List<String> names() {
        return List.copyOf(REGISTRY.keySet());
    }
}
