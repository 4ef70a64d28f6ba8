// Overrides.java — Hydra-style command-line overrides applied to a ConfigTree before binding:
//   a.b.c=value    set a key of the schema (value: a YAML scalar or flow value: 3, 1e-5, true,
//                  null, text, [1, 2], {k: v})
//   +a.b=value     add a key that the file does not set (a new model, a new agent at the end)
//   ++a.b=value    set or add
//   ~a.b           delete a key the file sets (a schema key goes back to its default)
// Paths are checked against the schema (the config records) as they are walked, so that a typo
// is reported with the nearest valid key before anything is bound. Lists are indexed
// agents[1].model or agents.1.model, or by an entry's id: agents.verifier.model.
package dev.drmas.config;

import java.lang.reflect.RecordComponent;
import java.lang.reflect.Type;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

final class Overrides {
    private Overrides() {
    }

    enum Kind { SET, ADD, FORCE, DELETE }

    /** One parsed override; {@code origin} is how errors refer to it. */
    record Override(Kind kind, String key, List<String> segments, String value, String origin) {
    }

    static Override parse(String text) {
        String origin = "override '" + text + "'";
        String s = text.strip();
        Kind kind;
        int skip;
        if (s.startsWith("~")) {
            kind = Kind.DELETE;
            skip = 1;
        } else if (s.startsWith("++")) {
            kind = Kind.FORCE;
            skip = 2;
        } else if (s.startsWith("+")) {
            kind = Kind.ADD;
            skip = 1;
        } else {
            kind = Kind.SET;
            skip = 0;
        }
        int eq = s.indexOf('=');
        if (kind == Kind.DELETE && eq >= 0) {
            throw ConfigException.in(origin, "a delete takes no value: write ~" + s.substring(1, eq).strip());
        }
        if (kind != Kind.DELETE && eq < 0) throw ConfigException.in(origin, "expected key.path=value");
        String key = (kind == Kind.DELETE ? s.substring(skip) : s.substring(skip, eq)).strip();
        if (key.isEmpty()) throw ConfigException.in(origin, "the key is empty");
        List<String> segments;
        try {
            segments = KeyPaths.split(key);
        } catch (IllegalArgumentException e) {
            throw ConfigException.in(origin, "bad key path " + e.getMessage());
        }
        String value = kind == Kind.DELETE ? null : s.substring(eq + 1).strip();
        return new Override(kind, key, segments, value, origin);
    }

    /** Applies {@code o} to {@code tree}, checking its path against the schema. */
    @SuppressWarnings("unchecked")
    static void apply(ConfigTree tree, Override o) {
        Binder binder = new Binder(tree);
        Type type = RunConfig.class;
        Object template = RunConfig.defaults();
        Object container = tree.root;
        String path = "";
        List<String> segs = o.segments();
        for (int i = 0; i < segs.size(); i++) {
            String seg = segs.get(i);
            boolean last = i == segs.size() - 1;
            Class<?> raw = Binder.raw(type);
            Type childType;
            Object childTemplate;
            String childPath;
            Object key; // String for mappings, Integer for lists
            if (raw.isRecord()) {
                // a workflow-typed section's template may be another workflow's record
                if (template != null && !raw.isInstance(template)) template = Binder.template(raw);
                RecordComponent c = Binder.component(raw, seg);
                childPath = KeyPaths.child(path, seg);
                if (c == null || binder.componentType(c) == null) throw unknown(binder, childPath, o);
                childType = binder.componentType(c);
                childTemplate = template == null ? null : Binder.get(c, template);
                if (binder.typedAs(c, WorkflowSchema.Part.AGENTS)) childTemplate = binder.defaultAgents();
                key = seg;
            } else if (raw == Map.class) {
                childPath = KeyPaths.child(path, seg);
                Map<String, Object> m = (Map<String, Object>) container;
                boolean adding = o.kind() == Kind.ADD || o.kind() == Kind.FORCE;
                if (!m.containsKey(seg) && !adding) {
                    throw new ConfigException(o.origin(), childPath, "no such entry" + KeyPaths.didYouMean(seg, m.keySet())
                            + (m.isEmpty() ? " (there are none)" : "; entries: " + String.join(", ", m.keySet())) + "; add one with +" + o.key()
                            + (o.kind() == Kind.DELETE ? "" : "=..."));
                }
                childType = Binder.typeArg(type, 1);
                childTemplate = template instanceof Map<?, ?> tm && tm.containsKey(seg) ? tm.get(seg) : null;
                key = seg;
            } else if (raw == List.class) {
                List<Object> l = (List<Object>) container;
                int index = index(l, seg);
                // +agents[2]={id: critic} or +agents[2].id=critic appends an entry
                boolean append = index == l.size() && (o.kind() == Kind.ADD || o.kind() == Kind.FORCE);
                if (index < 0 || (index >= l.size() && !append)) {
                    boolean appendable = index == l.size();
                    throw new ConfigException(o.origin(), path + "[" + seg + "]", "no such entry: " + path + " has "
                            + l.size() + " entries" + ids(l) + (appendable ? "; append one with +"
                            + o.key() + (o.kind() == Kind.DELETE ? "" : "=...") : ""));
                }
                if (append && !last) {
                    l.add(new LinkedHashMap<String, Object>());
                    // what the new entry lacks (its id, say) is this override's doing, not the file's
                    tree.setOrigin(KeyPaths.element(path, index), o.origin());
                }
                childPath = KeyPaths.element(path, index);
                childType = Binder.typeArg(type, 0);
                childTemplate = template instanceof List<?> tl && index < tl.size() ? tl.get(index) : null;
                key = index;
            } else {
                throw new ConfigException(o.origin(), path, "is a single value; it has no key " + seg);
            }

            if (last) {
                change(tree, container, key, childPath, o);
                return;
            }
            Object next = get(container, key);
            if (next == null) { // absent, or `ppo:` with nothing under it
                next = fresh(childType, childTemplate);
                put(container, key, next);
            } else if (Binder.raw(childType) == List.class ? !(next instanceof List<?>) : !(next instanceof Map<?, ?>)) {
                // the file has the wrong shape here; binding would report it, but the walk cannot go on
                throw new ConfigException(o.origin(), childPath, "is " + Binder.describe(next) + " in the config, not "
                        + (Binder.raw(childType) == List.class ? "a list" : "a section") + "; cannot set a key under it");
            }
            container = next;
            type = childType;
            template = childTemplate;
            path = childPath;
        }
    }

    private static void change(ConfigTree tree, Object container, Object key, String path, Override o) {
        boolean present = has(container, key);
        switch (o.kind()) {
            case DELETE -> {
                if (!present) throw new ConfigException(o.origin(), path, "is not set in the config, nothing to delete");
                if (container instanceof List<?> l) {
                    l.remove((int) (Integer) key);
                    // later entries move up: their recorded lines no longer match their index
                    tree.setOrigin(path.substring(0, path.lastIndexOf('[')), o.origin());
                } else {
                    ((Map<?, ?>) container).remove(key);
                    tree.dropOrigins(path);
                }
            }
            case ADD -> {
                if (present) {
                    throw new ConfigException(o.origin(), path, "is already set in the config; override it with "
                            + path + "=" + o.value() + " (or ++" + path + "=" + o.value() + ")");
                }
                set(tree, container, key, path, o);
            }
            case SET, FORCE -> set(tree, container, key, path, o);
        }
    }

    @SuppressWarnings("unchecked")
    private static void set(ConfigTree tree, Object container, Object key, String path, Override o) {
        Object value = ConfigTree.parseValue(o.value(), o.origin());
        if (container instanceof List<?> l && (Integer) key == l.size()) ((List<Object>) l).add(value);
        else put(container, key, value);
        tree.setOrigin(path, o.origin());
    }

    /** A list index, or the position of the entry whose id is {@code seg}; -1 when neither. */
    private static int index(List<Object> l, String seg) {
        if (seg.matches("[0-9]+")) {
            try {
                return Integer.parseInt(seg);
            } catch (NumberFormatException e) {
                return -1;
            }
        }
        for (int i = 0; i < l.size(); i++) {
            if (l.get(i) instanceof Map<?, ?> m && seg.equals(String.valueOf(m.get("id")))) return i;
        }
        return -1;
    }

    private static String ids(List<Object> l) {
        List<String> ids = new ArrayList<>();
        for (Object e : l) if (e instanceof Map<?, ?> m && m.get("id") != null) ids.add(String.valueOf(m.get("id")));
        return ids.isEmpty() ? "" : " (ids " + String.join(", ", ids) + ")";
    }

    /**
     * What an absent section becomes when an override reaches inside it: an empty mapping for a
     * section (its defaults fill in at binding), the default entries for the models map and the
     * agents list (so that models.policy.optim.lr=... works on a file that does not list models).
     */
    private static Object fresh(Type type, Object template) {
        Class<?> raw = Binder.raw(type);
        if ((raw == Map.class || raw == List.class) && template != null) return Binder.toTree(template);
        if (raw == List.class) return new ArrayList<>();
        return new LinkedHashMap<String, Object>();
    }

    private static ConfigException unknown(Binder binder, String path, Override o) {
        String near = KeyPaths.nearest(path, binder.knownPaths());
        return new ConfigException(o.origin(), path, "no such key in the config schema"
                + (near == null ? "" : " (did you mean " + near + "?)"));
    }

    private static Object get(Object container, Object key) {
        if (container instanceof List<?> l) return (Integer) key < l.size() ? l.get((Integer) key) : null;
        return ((Map<?, ?>) container).get(key);
    }

    private static boolean has(Object container, Object key) {
        if (container instanceof List<?> l) return (Integer) key < l.size();
        return ((Map<?, ?>) container).containsKey(key);
    }

    @SuppressWarnings("unchecked")
    private static void put(Object container, Object key, Object value) {
        if (container instanceof List<?> l) ((List<Object>) l).set((Integer) key, value);
        else ((Map<String, Object>) container).put((String) key, value);
    }
}
