// Binder.java — binds a ConfigTree to the immutable config records by reflection over their
// components (camelCase component = snake_case key), and turns records back into a tree for
// toYaml. The records are the schema: a key is valid iff a component of that name exists; a
// missing key takes the value of the record's template (its static defaults(), or the enclosing
// template's component). Errors name the full key path, where the value came from, what was
// expected and what was found. Components marked WorkflowSchema.Typed (orchestra.options,
// data.synthetic) take the record type of the workflow that orchestra.name names.
package dev.drmas.config;

import dev.drmas.algo.ConfigEnum;
import dev.drmas.algo.KlEstimator;
import dev.drmas.model.Family;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.lang.reflect.ParameterizedType;
import java.lang.reflect.RecordComponent;
import java.lang.reflect.Type;
import java.math.BigInteger;
import java.nio.file.InvalidPathException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.regex.Pattern;
import java.util.stream.Collectors;

final class Binder {
    private static final Pattern INTEGER = Pattern.compile("[-+]?[0-9]+");
    // a decimal number as YAML or Python would write it; not Java's NaN, Infinity, 0x1p3 or 1.5d
    private static final Pattern REAL = Pattern.compile("[-+]?([0-9]+\\.?[0-9]*|\\.[0-9]+)([eE][-+]?[0-9]+)?");

    private final ConfigTree tree;
    private List<String> known;

    Binder(ConfigTree tree) {
        this.tree = tree;
    }

    RunConfig bindRoot() {
        return (RunConfig) bind(RunConfig.class, tree.root, "", RunConfig.defaults());
    }

    // ------------------------------------------------------------------ workflow-typed sections

    private WorkflowSchema workflow;

    /** The workflow that the tree's orchestra.name names (the default one when it names none). */
    WorkflowSchema workflow() {
        if (workflow == null) {
            Object name = tree.root.get("orchestra") instanceof Map<?, ?> o ? o.get("name") : null;
            String n = name == null ? OrchestraConfig.DEFAULT_WORKFLOW : name.toString();
            workflow = WorkflowSchema.find(n);
            if (workflow == null) throw fail("orchestra.name", WorkflowSchema.unknown(n));
        }
        return workflow;
    }

    /** A component's type: its declared one, or for a workflow-typed one the workflow's record (null: it has none). */
    Type componentType(RecordComponent c) {
        WorkflowSchema.Typed typed = c.getAnnotation(WorkflowSchema.Typed.class);
        if (typed == null) return c.getGenericType();
        return switch (typed.value()) {
            case OPTIONS -> requireBindable(workflow(), "options record", workflow().optionsType(), "orchestra.name");
            case SYNTHETIC_DATA -> requireBindable(workflow(), "synthetic data record", workflow().syntheticDataType(), "orchestra.name");
            case AGENTS -> c.getGenericType();
        };
    }

    /**
     * {@code type} (a workflow's {@code what}; null passes) when the binder can read it: a public
     * record (its enclosing classes public too) with a public static defaults(). Otherwise an error
     * naming the workflow and the record: reflection would fail later with a message that says
     * neither (a defaults() it cannot see leaves every missing key null).
     */
    <T> Class<T> requireBindable(WorkflowSchema w, String what, Class<T> type, String path) {
        String problem = unbindable(w, what, type);
        if (problem != null) throw fail(path, problem);
        return type;
    }

    /** The error of {@link #requireBindable} for {@code type}, or null when it is readable (or null). */
    static String unbindable(WorkflowSchema w, String what, Class<?> type) {
        String problem = type == null ? null : notBindable(type);
        if (problem == null) return null;
        return "workflow '" + w.name() + "': " + what + " " + type.getName() + " must be public with a public static defaults() ("
                + problem + ")";
    }

    /** Why the binder cannot read record {@code raw} (not public, or no public static defaults()), or null. */
    static String notBindable(Class<?> raw) {
        for (Class<?> c = raw; c != null; c = c.getEnclosingClass()) {
            if (!Modifier.isPublic(c.getModifiers())) return (c == raw ? "it" : "its enclosing " + c.getName()) + " is not public";
        }
        Method m;
        try {
            m = raw.getDeclaredMethod("defaults");
        } catch (NoSuchMethodException e) {
            return "it has no defaults()";
        }
        if (!Modifier.isStatic(m.getModifiers())) return "its defaults() is not static";
        if (!Modifier.isPublic(m.getModifiers())) return "its defaults() is not public";
        if (!raw.isAssignableFrom(m.getReturnType())) return "its defaults() returns " + m.getReturnType().getName();
        return null;
    }

    private static boolean hasTypedParts(Class<?> record) {
        for (RecordComponent c : record.getRecordComponents()) if (c.getAnnotation(WorkflowSchema.Typed.class) != null) return true;
        return false;
    }

    static boolean typedAs(RecordComponent c, WorkflowSchema.Part part) {
        WorkflowSchema.Typed t = c.getAnnotation(WorkflowSchema.Typed.class);
        return t != null && t.value() == part;
    }

    /**
     * The agents of a config that lists none: one per default role of the workflow, on the tree's
     * one model (models: left out is the default model), or on the default model ('policy') where
     * there are several and it is one of them (so that `+models.big={} agents.verifier.model=big`
     * moves the verifier alone, in either order); else on none (null), so that overrides can still
     * name each agent's model.
     */
    List<AgentSpec> defaultAgents() {
        List<String> models = modelIds();
        String model = models.size() == 1 ? models.getFirst() : models.contains(RunConfig.DEFAULT_MODEL) ? RunConfig.DEFAULT_MODEL : null;
        return RunConfig.defaultAgents(workflow().name(), model);
    }

    /** The keys of the tree's models: section; the default model's when it has none (or is not a mapping, reported when bound). */
    private List<String> modelIds() {
        if (tree.root.get("models") instanceof Map<?, ?> m && !m.isEmpty()) return m.keySet().stream().map(k -> (String) k).toList();
        return List.of(RunConfig.DEFAULT_MODEL);
    }

    /** {@link #defaultAgents()} for a config without agents:, which must not leave the choice of model open. */
    private List<AgentSpec> defaultAgentsWhenLeftOut() {
        List<AgentSpec> agents = defaultAgents();
        List<String> models = modelIds();
        if (agents.stream().allMatch(a -> a.model() != null)) return agents;
        StringBuilder example = new StringBuilder();
        for (int i = 0; i < agents.size(); i++) {
            example.append(i == 0 ? "" : ", ").append("{id: ").append(agents.get(i).id()).append(", model: ")
                    .append(models.get(i % models.size())).append("}");
        }
        // no agents: line to point at; the models: line is what makes the list necessary
        throw new ConfigException(tree.origin("models"), "agents", "is required when there is more than one model (models: "
                + String.join(", ", models) + "): list the " + workflow().name() + " workflow's agents and the model each runs on, e.g. "
                + "agents: [" + example + "]");
    }

    /** The static defaults() of a config record; a bug of the record's author when it has none. */
    static <T> T defaultsOf(Class<T> record) {
        String problem = notBindable(record);
        if (problem != null) {
            throw new IllegalStateException("config record " + record.getName() + " must be public with a public static defaults() ("
                    + problem + ")");
        }
        Object t = template(record);
        if (t == null) throw new IllegalStateException(record.getName() + " is a config record without a static defaults()");
        return record.cast(t);
    }

    // ------------------------------------------------------------------ tree -> records

    private Object bind(Type type, Object node, String path, Object template) {
        Class<?> raw = raw(type);
        if (raw.isRecord()) return bindRecord(raw, node, path, template != null ? template : template(raw));
        if (raw == List.class) return bindList(typeArg(type, 0), node, path);
        if (raw == Map.class) return bindMap(typeArg(type, 1), node, path);
        if (raw == Object.class) return node;  // a free YAML value (a chat template's variable): its record checks it
        return scalar(raw, node, path);
    }

    private Object bindRecord(Class<?> raw, Object node, String path, Object template) {
        Map<?, ?> map;
        if (node == null) {
            map = Map.of(); // `ppo:` with every key commented out: all defaults
        } else if (node instanceof Map<?, ?> m) {
            map = m;
        } else {
            throw fail(path, "expected a section of keys (" + String.join(", ", keys(raw)) + "), got " + describe(node));
        }
        RecordComponent[] comps = raw.getRecordComponents();
        List<String> keys = keys(raw);
        for (Object k : map.keySet()) {
            if (!keys.contains((String) k)) throw unknownKey(KeyPaths.child(path, (String) k), path, keys);
        }
        Object[] args = new Object[comps.length];
        Class<?>[] types = new Class<?>[comps.length];
        for (int i = 0; i < comps.length; i++) {
            types[i] = comps[i].getType();
            String key = keys.get(i);
            String at = KeyPaths.child(path, key);
            Type type = componentType(comps[i]);
            Object dflt = template == null ? null : get(comps[i], template);
            if (type == null) {  // a workflow-typed section that this workflow does not have
                if (map.get(key) != null) {
                    throw fail(at, "workflow '" + workflow().name() + "' has no " + at + " (it has no built-in task generator; "
                            + "its tasks come from data.source: jsonl)");
                }
                args[i] = null;
                continue;
            }
            // the template's section may be another workflow's: then the workflow's own defaults
            if (type != comps[i].getGenericType() && !raw(type).isInstance(dflt)) dflt = template(raw(type));
            if (typedAs(comps[i], WorkflowSchema.Part.AGENTS) && !map.containsKey(key)) dflt = defaultAgentsWhenLeftOut();
            // an absent section with workflow-typed parts is bound from nothing, so that those parts
            // take this workflow's defaults rather than the template's workflow's
            boolean descend = map.containsKey(key) || raw(type).isRecord() && hasTypedParts(raw(type));
            args[i] = descend ? bind(type, map.get(key), at, dflt) : dflt;
        }
        return construct(raw, types, args, path);
    }

    private Object construct(Class<?> raw, Class<?>[] types, Object[] args, String path) {
        try {
            return raw.getDeclaredConstructor(types).newInstance(args);
        } catch (InvocationTargetException e) {
            if (e.getCause() instanceof ConfigException ce && ce.origin() == null) {
                // a record names its own key; prefix where the record sits
                String key = ce.key() == null || ce.key().isEmpty() ? path
                        : ce.key().startsWith("[") ? path + ce.key() : KeyPaths.child(path, ce.key());
                throw fail(key, ce.problem());
            }
            if (e.getCause() instanceof IllegalArgumentException iae && !(iae instanceof ConfigException)) {
                throw fail(path, iae.getMessage());
            }
            if (e.getCause() instanceof RuntimeException re) throw re;
            throw new IllegalStateException(e.getCause());
        } catch (ReflectiveOperationException | IllegalArgumentException e) {
            // a primitive left null: only when a record's template is missing, a bug of this package
            throw new IllegalStateException("binding " + raw.getSimpleName() + " at '" + path + "'", e);
        }
    }

    private List<Object> bindList(Type element, Object node, String path) {
        if (node == null) return null;
        if (!(node instanceof List<?> list)) throw fail(path, "expected a list, got " + describe(node));
        List<Object> out = new ArrayList<>();
        for (int i = 0; i < list.size(); i++) out.add(bind(element, list.get(i), KeyPaths.element(path, i), null));
        return out;
    }

    private Map<String, Object> bindMap(Type value, Object node, String path) {
        if (node == null) return null;
        if (!(node instanceof Map<?, ?> map)) throw fail(path, "expected a mapping, got " + describe(node));
        Map<String, Object> out = new LinkedHashMap<>();
        for (Map.Entry<?, ?> e : map.entrySet()) {
            String k = (String) e.getKey();
            out.put(k, bind(value, e.getValue(), KeyPaths.child(path, k), null));
        }
        return out;
    }

    private Object scalar(Class<?> raw, Object node, String path) {
        if (node instanceof Map<?, ?> || node instanceof List<?>) {
            throw fail(path, "expected " + typeName(raw) + ", got " + describe(node));
        }
        if (node == null) {
            if (raw.isPrimitive()) throw fail(path, "expected " + typeName(raw) + ", got null");
            return null;
        }
        if (raw == int.class || raw == Integer.class) {
            long v = integral(node, path, raw);
            if (v < Integer.MIN_VALUE || v > Integer.MAX_VALUE) throw fail(path, "is out of the integer range: " + v);
            return (int) v;
        }
        if (raw == long.class || raw == Long.class) return integral(node, path, raw);
        if (raw == double.class || raw == Double.class) {
            if (node instanceof Number n) return n.doubleValue();
            if (node instanceof String s && REAL.matcher(s.trim()).matches()) return Double.parseDouble(s.trim());
            throw fail(path, "expected " + typeName(raw) + ", got " + describe(node));
        }
        if (raw == boolean.class || raw == Boolean.class) {
            if (node instanceof Boolean b) return b;
            throw fail(path, "expected " + typeName(raw) + ", got " + describe(node));
        }
        String text = node instanceof String s ? s : node.toString(); // name: 42 is the name "42"
        if (raw == String.class) return text;
        if (raw == Path.class) {
            // Path.of("") is the working folder: `train_file: ''` or `run.output_dir=` would quietly mean "here"
            if (text.isBlank()) throw fail(path, "must not be empty");
            try {
                return Path.of(text);
            } catch (InvalidPathException e) {
                throw fail(path, "'" + text + "' is not a file path: " + e.getReason());
            }
        }
        if (raw.isEnum()) return parseEnum(raw, text, path);
        throw new IllegalStateException("no binding for " + raw + " at " + path);
    }

    private long integral(Object node, String path, Class<?> raw) {
        if (node instanceof Long l) return l;
        if (node instanceof BigInteger) throw fail(path, "is out of the integer range: " + node);
        if (node instanceof Double d && Double.isFinite(d) && d == Math.rint(d) && Math.abs(d) < 0x1p53) return d.longValue();
        if (node instanceof String s && INTEGER.matcher(s.trim()).matches()) {
            try {
                return Long.parseLong(s.trim());
            } catch (NumberFormatException e) {
                throw fail(path, "is out of the integer range: " + s);
            }
        }
        throw fail(path, "expected " + typeName(raw) + ", got " + describe(node));
    }

    private Object parseEnum(Class<?> raw, String text, String path) {
        for (Object c : raw.getEnumConstants()) {
            if (spelling(c).equalsIgnoreCase(text.trim())) return c;
        }
        if (raw == KlEstimator.class) {
            try {
                return KlEstimator.parse(text); // verl's aliases: low_var_kl, kl, mse
            } catch (IllegalArgumentException e) {
                // fall through to the message below
            }
        }
        List<String> valid = spellings(raw);
        throw fail(path, "'" + text + "' is not one of " + String.join(", ", valid) + KeyPaths.didYouMean(text, valid));
    }

    private ConfigException unknownKey(String path, String section, List<String> validHere) {
        String near = KeyPaths.nearest(path, knownPaths());
        String problem = near != null ? "unknown key (did you mean " + near + "?)"
                : "unknown key; valid keys " + (section.isEmpty() ? "at the top" : "in " + section) + ": "
                + String.join(", ", validHere);
        return fail(path, problem);
    }

    ConfigException fail(String path, String problem) {
        return new ConfigException(tree.origin(path), path, problem);
    }

    /** Every key path the schema accepts over this tree: its sections, its keys, its models and agents. */
    List<String> knownPaths() {
        if (known == null) {
            known = new ArrayList<>();
            paths(RunConfig.class, tree.root, RunConfig.defaults(), "", known);
        }
        return known;
    }

    private void paths(Type type, Object node, Object template, String path, List<String> out) {
        Class<?> raw = raw(type);
        if (raw.isRecord()) {
            RecordComponent[] comps = raw.getRecordComponents();
            if (template == null || !raw.isInstance(template)) template = template(raw);
            for (RecordComponent c : comps) {
                String p = KeyPaths.child(path, snake(c.getName()));
                Type ct = componentType(c);
                if (ct == null) continue;
                out.add(p);
                Object child = node instanceof Map<?, ?> m ? m.get(snake(c.getName())) : null;
                paths(ct, child, template == null ? null : get(c, template), p, out);
            }
        } else if (raw == Map.class) {
            Type value = typeArg(type, 1);
            Map<?, ?> m = node instanceof Map<?, ?> nm ? nm : template instanceof Map<?, ?> tm ? tm : Map.of();
            for (Object k : m.keySet()) {
                String p = KeyPaths.child(path, (String) k);
                out.add(p);
                Object t = template instanceof Map<?, ?> tm ? tm.get(k) : null;
                paths(value, node == m ? m.get(k) : null, t, p, out);
            }
        } else if (raw == List.class) {
            Type element = typeArg(type, 0);
            if (!raw(element).isRecord()) return;
            List<?> l = node instanceof List<?> nl ? nl : template instanceof List<?> tl ? tl : List.of();
            for (int i = 0; i < l.size(); i++) {
                String p = KeyPaths.element(path, i);
                out.add(p);
                paths(element, node == l ? l.get(i) : null, node == l ? null : l.get(i), p, out);
            }
        }
    }

    // ------------------------------------------------------------------ records -> tree

    /** The tree form of a config value: records as mappings of snake_case keys, enums by their config spelling. */
    static Object toTree(Object v) {
        if (v == null) return null;
        if (v instanceof OptimOverrides o) {
            // only what an agent sets: a dozen "lr: null" lines per agent would bury the settings
            Map<String, Object> m = new LinkedHashMap<>();
            o.set().forEach((k, e) -> m.put(k, toTree(e)));
            return m;
        }
        if (v instanceof Record r) {
            Map<String, Object> m = new LinkedHashMap<>();
            for (RecordComponent c : r.getClass().getRecordComponents()) m.put(snake(c.getName()), toTree(get(c, r)));
            return m;
        }
        if (v instanceof List<?> l) {
            List<Object> out = new ArrayList<>();
            for (Object e : l) out.add(toTree(e));
            return out;
        }
        if (v instanceof Map<?, ?> map) {
            Map<String, Object> m = new LinkedHashMap<>();
            map.forEach((k, e) -> m.put((String) k, toTree(e)));
            return m;
        }
        if (v instanceof Enum<?> e) return spelling(e);
        if (v instanceof Path p) return p.toString();
        if (v instanceof Integer i) return i.longValue();
        return v;
    }

    // ------------------------------------------------------------------ reflection helpers

    static Class<?> raw(Type t) {
        if (t instanceof Class<?> c) return c;
        if (t instanceof ParameterizedType p) return (Class<?>) p.getRawType();
        throw new IllegalStateException("unsupported type " + t);
    }

    static Type typeArg(Type t, int i) {
        return ((ParameterizedType) t).getActualTypeArguments()[i];
    }

    static Object get(RecordComponent c, Object record) {
        try {
            return c.getAccessor().invoke(record);
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException(e);
        }
    }

    /** The record's static defaults(): what a missing key of a list entry or map value takes. */
    static Object template(Class<?> raw) {
        try {
            Method m = raw.getMethod("defaults");
            return m.invoke(null);
        } catch (NoSuchMethodException e) {
            return null;
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException(e);
        }
    }

    static List<String> keys(Class<?> record) {
        return Arrays.stream(record.getRecordComponents()).map(c -> snake(c.getName())).toList();
    }

    static RecordComponent component(Class<?> record, String key) {
        for (RecordComponent c : record.getRecordComponents()) if (snake(c.getName()).equals(key)) return c;
        return null;
    }

    static String snake(String camel) {
        StringBuilder b = new StringBuilder();
        for (char ch : camel.toCharArray()) {
            if (Character.isUpperCase(ch)) b.append('_').append(Character.toLowerCase(ch));
            else b.append(ch);
        }
        return b.toString();
    }

    static String spelling(Object e) {
        if (e instanceof ConfigEnum c) return c.configName();
        if (e instanceof Family f) return f.modelType();
        return ((Enum<?>) e).name().toLowerCase(Locale.ROOT).replace('_', '-');
    }

    static List<String> spellings(Class<?> enumType) {
        return Arrays.stream(enumType.getEnumConstants()).map(Binder::spelling).toList();
    }

    static String typeName(Class<?> raw) {
        if (raw == int.class || raw == Integer.class || raw == long.class || raw == Long.class) return "an integer";
        if (raw == double.class || raw == Double.class) return "a number";
        if (raw == boolean.class || raw == Boolean.class) return "true or false";
        if (raw == String.class) return "a string";
        if (raw == Path.class) return "a file path";
        if (raw.isEnum()) return "one of " + String.join(", ", spellings(raw));
        return raw.getSimpleName();
    }

    /** A value as an error message quotes it: 'abc' (a string), 1.5 (a number), a mapping, a list, null. */
    static String describe(Object v) {
        if (v == null) return "null";
        if (v instanceof String s) return "'" + s + "' (a string)";
        if (v instanceof Boolean) return v + " (a boolean)";
        if (v instanceof Number) return v + " (a number)";
        if (v instanceof Map<?, ?> m) return m.isEmpty() ? "an empty mapping" : "a mapping {"
                + m.keySet().stream().map(Object::toString).collect(Collectors.joining(", ")) + "}";
        if (v instanceof List<?>) return "a list";
        return v.toString();
    }
}
