// ConfigTree.java — a run configuration before binding: plain maps, lists and scalars read from
// YAML, together with where every key came from (file:line, or the override that set it), so that
// an error found later while binding can still point at the line. Also `extends:` (a variant that
// starts from another file, merged deep, the child winning) and the YAML parsing of override
// values. Jackson's YAML parser reads the text (it gives token lines); the tree is built here so
// that duplicate keys are errors and every key keeps its line.
package dev.drmas.config;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import com.fasterxml.jackson.dataformat.yaml.YAMLParser;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.math.BigInteger;
import java.nio.ByteBuffer;
import java.nio.CharBuffer;
import java.nio.charset.CoderResult;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

final class ConfigTree {
    private static final YAMLFactory YAML = new YAMLFactory();

    /** The top-level mapping; nested values are LinkedHashMap, ArrayList, String, Long, BigInteger, Double, Boolean or null. */
    final Map<String, Object> root;
    /** Key path (as {@link KeyPaths} prints it) → where its value came from. */
    private final Map<String, String> origins;

    ConfigTree(Map<String, Object> root, Map<String, String> origins) {
        this.root = root;
        this.origins = origins;
    }

    static ConfigTree empty() {
        return new ConfigTree(new LinkedHashMap<>(), new HashMap<>());
    }

    /**
     * Where {@code path} came from: its own recorded origin; else, for a key that exists only because keys
     * under it were set (an override's {@code +a.b.c=v} makes {@code a.b}), that of the alphabetically
     * first of them; else the nearest enclosing key's; null if nowhere.
     */
    String origin(String path) {
        String own = origins.get(path);
        if (own != null) return own;
        String under = origins.keySet().stream().filter(k -> k.startsWith(path + ".") || k.startsWith(path + "["))
                .sorted().findFirst().map(origins::get).orElse(null);
        if (under != null) return under;
        String p = path;
        while (!p.isEmpty()) {
            String o = origins.get(p);
            if (o != null) return o;
            p = parentOf(p);
        }
        return null;
    }

    void setOrigin(String path, String origin) {
        dropOrigins(path);
        origins.put(path, origin);
    }

    /** Forgets the origins of {@code path} and everything under it (its value was replaced or removed). */
    void dropOrigins(String path) {
        origins.keySet().removeIf(k -> k.equals(path) || k.startsWith(path + ".") || k.startsWith(path + "["));
    }

    private static String parentOf(String p) {
        int cut = Math.max(p.lastIndexOf('.'), p.lastIndexOf('['));
        return cut < 0 ? "" : p.substring(0, cut);
    }

    // ------------------------------------------------------------------ files and extends

    /**
     * Reads {@code file} and, recursively, the files it extends (paths relative to the file's
     * folder). The key paths {@code ownOnly} are the file's own: a value its bases give them is
     * dropped, so that such a key is either set by {@code file} itself or left out.
     */
    static ConfigTree read(Path file, String... ownOnly) {
        return read(file, new ArrayList<>(), null, List.of(ownOnly));
    }

    private static ConfigTree read(Path file, List<Path> chain, String extendsOrigin, List<String> ownOnly) {
        Path abs = file.toAbsolutePath().normalize();
        if (chain.contains(abs)) {
            StringBuilder cycle = new StringBuilder();
            for (Path p : chain.subList(chain.indexOf(abs), chain.size())) cycle.append(p.getFileName()).append(" -> ");
            throw new ConfigException(extendsOrigin, "extends", "cycle: " + cycle + abs.getFileName());
        }
        String text;
        try {
            if (Files.isDirectory(file)) throw ConfigException.in(file.toString(), "is a folder, not a config file");
            text = utf8(file, Files.readAllBytes(file));
        } catch (NoSuchFileException e) {
            if (extendsOrigin == null) throw ConfigException.in(file.toString(), "no such file");
            throw new ConfigException(extendsOrigin, "extends", "no such file " + file);
        } catch (IOException e) {
            throw ConfigException.in(file.toString(), "cannot read: " + e.getMessage());
        }
        ConfigTree tree = parse(text, file.toString());
        if (!tree.root.containsKey("extends")) return tree;

        String origin = tree.origins.get("extends");
        Object ext = tree.root.remove("extends");
        tree.dropOrigins("extends");
        List<String> parents = new ArrayList<>();
        if (ext instanceof String s) {
            parents.add(s);
        } else if (ext instanceof List<?> list && list.stream().allMatch(e -> e instanceof String)) {
            for (Object e : list) parents.add((String) e);
        } else {
            throw new ConfigException(origin, "extends", "expected a file name or a list of file names, got "
                    + Binder.describe(ext));
        }
        List<Path> next = new ArrayList<>(chain);
        next.add(abs);
        ConfigTree merged = empty();
        // several parents merge in order; the file itself wins over all of them
        for (String p : parents) merged.mergeFrom(read(file.resolveSibling(p), next, origin, List.of()));
        for (String key : ownOnly) merged.remove(key);
        merged.mergeFrom(tree);
        return merged;
    }

    /** The file's text; bytes that are not UTF-8 are an error naming the line and column (Java's own says "Input length = 1"). */
    private static String utf8(Path file, byte[] bytes) {
        var decoder = StandardCharsets.UTF_8.newDecoder()
                .onMalformedInput(CodingErrorAction.REPORT).onUnmappableCharacter(CodingErrorAction.REPORT);
        ByteBuffer in = ByteBuffer.wrap(bytes);
        CharBuffer out = CharBuffer.allocate(bytes.length + 1);
        CoderResult r = decoder.decode(in, out, true);
        if (r.isError()) {
            int at = in.position(), line = 1, col = 1;
            for (int i = 0; i < at; i++) {
                if (bytes[i] == '\n') {
                    line++;
                    col = 1;
                } else if ((bytes[i] & 0xC0) != 0x80) {
                    col++;  // count characters, not continuation bytes
                }
            }
            throw ConfigException.in(file + ":" + line + ":" + col, String.format("not UTF-8 text (byte 0x%02x); save the file as UTF-8",
                    bytes[at] & 0xff));
        }
        decoder.flush(out);
        return out.flip().toString();
    }

    /**
     * Deep merge of {@code over} into this tree: mappings merge key by key, anything else (a list,
     * a scalar, null) replaces what was there. Origins follow the values that win.
     */
    void mergeFrom(ConfigTree over) {
        mergeMap(root, over.root, "", over);
    }

    private void mergeMap(Map<String, Object> base, Map<String, Object> over, String path, ConfigTree from) {
        for (Map.Entry<String, Object> e : over.entrySet()) {
            String p = KeyPaths.child(path, e.getKey());
            Object mine = base.get(e.getKey());
            if (mine instanceof Map<?, ?> && e.getValue() instanceof Map<?, ?>) {
                @SuppressWarnings("unchecked") Map<String, Object> m = (Map<String, Object>) mine;
                @SuppressWarnings("unchecked") Map<String, Object> o = (Map<String, Object>) e.getValue();
                String keyOrigin = from.origins.get(p);
                if (keyOrigin != null) origins.put(p, keyOrigin);
                mergeMap(m, o, p, from);
            } else {
                base.put(e.getKey(), e.getValue());
                dropOrigins(p);
                from.origins.forEach((k, v) -> {
                    if (k.equals(p) || k.startsWith(p + ".") || k.startsWith(p + "[")) origins.put(k, v);
                });
            }
        }
    }

    /** Removes the value at dotted key path {@code path} (mappings only), if there is one. */
    private void remove(String path) {
        Map<String, Object> m = root;
        String[] parts = path.split("\\.");
        for (int i = 0; i < parts.length - 1; i++) {
            if (!(m.get(parts[i]) instanceof Map<?, ?> next)) return;
            @SuppressWarnings("unchecked") Map<String, Object> n = (Map<String, Object>) next;
            m = n;
        }
        m.remove(parts[parts.length - 1]);
        dropOrigins(path);
    }

    // ------------------------------------------------------------------ YAML text

    /** Parses a whole config text; {@code source} names it in errors (a file name). */
    static ConfigTree parse(String text, String source) {
        ConfigTree tree = empty();
        try (JsonParser p = YAML.createParser(text)) {
            JsonToken t = p.nextToken();
            if (t == null) return tree; // an empty file: every default
            if (t == JsonToken.VALUE_NULL) { // a file with only comments or '---'
                oneDocument(p, source);
                return tree;
            }
            if (t != JsonToken.START_OBJECT) {
                String where = source + ":" + line(p);
                Object v = new Reader(p, source, true, new HashMap<>()).value("");
                throw ConfigException.in(where, "expected a mapping of sections (run:, ppo:, ...) at the top, got "
                        + Binder.describe(v));
            }
            Object v = new Reader(p, source, true, tree.origins).value("");
            @SuppressWarnings("unchecked") Map<String, Object> m = (Map<String, Object>) v;
            tree.root.putAll(m);
            oneDocument(p, source);
            return tree;
        } catch (JsonProcessingException e) {
            throw syntax(e, source);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /**
     * After the first document: any further one with content is an error (Jackson would go on
     * reading it, and the tree kept only the first, dropping the rest without a word). Empty
     * documents, such as a trailing '---', hold nothing to lose.
     */
    private static void oneDocument(JsonParser p, String source) throws IOException {
        for (JsonToken t = p.nextToken(); t != null; t = p.nextToken()) {
            if (t != JsonToken.VALUE_NULL) {
                throw ConfigException.in(source + ":" + line(p), "a config is one YAML document; a second one starts here"
                        + " (after a --- line): merge the two, or make one a file of its own that extends the other");
            }
        }
    }

    /** Parses an override's value as a YAML scalar or flow value: 3, 1e-5, true, null, abc, [1, 2], {k: v}. */
    static Object parseValue(String text, String origin) {
        if (text.isEmpty()) return ""; // `key=` is the empty string, as in Hydra
        try (JsonParser p = YAML.createParser(text)) {
            JsonToken t = p.nextToken();
            if (t == null) return "";
            Object v = new Reader(p, origin, false, new HashMap<>()).value("");
            if (p.nextToken() != null) throw ConfigException.in(origin, "the value is more than one YAML value");
            return v;
        } catch (JsonProcessingException e) {
            throw ConfigException.in(origin, "the value is not valid YAML (" + firstLine(e.getOriginalMessage())
                    + "); quote it if it is a string");
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private static ConfigException syntax(JsonProcessingException e, String source) {
        var loc = e.getLocation();
        String where = loc == null ? source : source + ":" + loc.getLineNr() + ":" + loc.getColumnNr();
        return ConfigException.in(where, "YAML syntax error: " + firstLine(e.getOriginalMessage()));
    }

    private static String firstLine(String s) {
        if (s == null) return "unreadable";
        int nl = s.indexOf('\n');
        return (nl < 0 ? s : s.substring(0, nl)).strip();
    }

    private static int line(JsonParser p) {
        return p.currentTokenLocation().getLineNr();
    }

    /** The current scalar token as a tree value; {@code where} (file:line) and {@code path} (its key) go into errors. */
    private static Object scalar(JsonParser p, String where, String path) throws IOException {
        if (p instanceof YAMLParser y && y.isCurrentAlias()) {
            // Jackson gives an alias as the string of its anchor's name: *x would silently be "x"
            throw new ConfigException(where, path, "YAML aliases (*" + p.getText() + ") are not supported; write the value out");
        }
        return switch (p.currentToken()) {
            case VALUE_STRING -> p.getText();
            case VALUE_NUMBER_INT -> {
                Number n = number(p, where, path);
                yield n instanceof BigInteger b ? b : (Object) n.longValue();
            }
            case VALUE_NUMBER_FLOAT -> number(p, where, path).doubleValue();
            case VALUE_TRUE -> Boolean.TRUE;
            case VALUE_FALSE -> Boolean.FALSE;
            case VALUE_NULL -> null;
            default -> throw new ConfigException(where, path, "unsupported YAML value " + p.getText());
        };
    }

    private static Number number(JsonParser p, String where, String path) throws IOException {
        try {
            return p.getNumberValue();
        } catch (JsonProcessingException e) {
            // e.g. .inf or .nan, which Jackson's YAML parser does not read
            throw new ConfigException(where, path, "not a number drmas can read: " + p.getText());
        }
    }

    /** Builds the tree from parser tokens, recording each key's line. */
    private record Reader(JsonParser p, String source, boolean withLines, Map<String, String> origins) {
        String where() {
            return withLines ? source + ":" + line(p) : source;
        }

        Object value(String path) throws IOException {
            JsonToken t = p.currentToken();
            if (t == JsonToken.START_OBJECT) {
                Map<String, Object> m = new LinkedHashMap<>();
                Map<String, Integer> lines = new HashMap<>();
                while (p.nextToken() == JsonToken.FIELD_NAME) {
                    String key = p.currentName();
                    int ln = line(p);
                    String kp = KeyPaths.child(path, key);
                    if (m.containsKey(key)) {
                        throw new ConfigException(where(), kp, "duplicate key"
                                + (withLines ? " (first at line " + lines.get(key) + ")" : ""));
                    }
                    lines.put(key, ln);
                    origins.put(kp, where());
                    p.nextToken();
                    m.put(key, value(kp));
                }
                return m;
            }
            if (t == JsonToken.START_ARRAY) {
                List<Object> list = new ArrayList<>();
                while (p.nextToken() != JsonToken.END_ARRAY) {
                    String ep = KeyPaths.element(path, list.size());
                    origins.put(ep, where());
                    list.add(value(ep));
                }
                return list;
            }
            return scalar(p, where(), path);
        }
    }
}
