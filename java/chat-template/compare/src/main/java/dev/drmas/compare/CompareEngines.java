// CompareEngines.java — renders drmas-chat-template's jinja2 goldens (../src/test/resources/
// chat-templates: the feature and fuzz cases, the Llama-3-style and Qwen3 chat templates) with
// Jinjava and Pebble, configured as close to HF's jinja2 environment as their options go, and
// prints how many each renders byte for byte. The evidence for README.md; not part of the build.
package dev.drmas.compare;

import com.fasterxml.jackson.databind.ObjectMapper; // Jinjava's own dependency
import com.hubspot.jinjava.Jinjava;
import com.hubspot.jinjava.JinjavaConfig;
import com.hubspot.jinjava.LegacyOverrides;
import com.hubspot.jinjava.interpret.RenderResult;
import com.hubspot.jinjava.interpret.TemplateError;
import com.hubspot.jinjava.lib.fn.ELFunctionDefinition;
import io.pebbletemplates.pebble.PebbleEngine;
import io.pebbletemplates.pebble.extension.AbstractExtension;
import io.pebbletemplates.pebble.extension.Function;
import io.pebbletemplates.pebble.loader.StringLoader;
import io.pebbletemplates.pebble.template.EvaluationContext;
import io.pebbletemplates.pebble.template.PebbleTemplate;
import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.LocalDateTime;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;

public final class CompareEngines {
    /** The instant make_goldens.py pins strftime_now to. */
    private static final LocalDateTime NOW = LocalDateTime.parse("2025-03-07T14:05:09");

    private CompareEngines() {}

    /** HF's raise_exception global. */
    public static String raiseException(String message) {
        throw new IllegalStateException("raise_exception: " + message);
    }

    /** HF's strftime_now global, for the formats the goldens use. */
    public static String strftimeNow(String format) {
        String java = format.replace("%Y", "yyyy").replace("%m", "MM").replace("%d", "dd").replace("%B", "MMMM")
                .replace("%b", "MMM").replace("%H", "HH").replace("%M", "mm").replace("%S", "ss");
        return NOW.format(DateTimeFormatter.ofPattern(java, Locale.ENGLISH));
    }

    interface Engine {
        String render(String source, Map<String, Object> context) throws Exception;
    }

    /** Jinjava with jinja2's trim_blocks, lstrip_blocks and keep_trailing_newline=False; legacy: LegacyOverrides.ALL. */
    static Engine jinjava(boolean legacy) {
        JinjavaConfig.Builder b = JinjavaConfig.newBuilder().withTrimBlocks(true).withLstripBlocks(true)
                .withKeepTrailingNewline(false);
        if (legacy) b.withLegacyOverrides(LegacyOverrides.ALL);
        Jinjava j = new Jinjava(b.build());
        j.getGlobalContext().registerFunction(new ELFunctionDefinition("", "raise_exception", CompareEngines.class,
                "raiseException", String.class));
        j.getGlobalContext().registerFunction(new ELFunctionDefinition("", "strftime_now", CompareEngines.class,
                "strftimeNow", String.class));
        return (source, context) -> {
            RenderResult r = j.renderForResult(source, context);
            for (TemplateError e : r.getErrors()) {
                if (e.getSeverity() == TemplateError.ErrorType.FATAL) throw new IllegalStateException(e.getMessage());
            }
            return r.getOutput();
        };
    }

    private static Function pebbleFunction(String arg, java.util.function.Function<String, String> f) {
        return new Function() {
            @Override
            public List<String> getArgumentNames() {
                return List.of(arg);
            }

            @Override
            public Object execute(Map<String, Object> args, PebbleTemplate self, EvaluationContext ctx, int line) {
                return f.apply(String.valueOf(args.get(arg)));
            }
        };
    }

    /** Pebble with newLineTrimming (its trim_blocks), no autoescaping, lenient variables. */
    static Engine pebble() {
        Map<String, Function> functions = Map.of("raise_exception", pebbleFunction("message", CompareEngines::raiseException),
                "strftime_now", pebbleFunction("format", CompareEngines::strftimeNow));
        PebbleEngine p = new PebbleEngine.Builder().loader(new StringLoader()).newLineTrimming(true).autoEscaping(false)
                .strictVariables(false).cacheActive(false).extension(new AbstractExtension() {
                    @Override
                    public Map<String, Function> getFunctions() {
                        return functions;
                    }
                }).build();
        return (source, context) -> {
            StringWriter w = new StringWriter();
            p.getTemplate(source).evaluate(w, context);
            return w.toString();
        };
    }

    record Case(String file, String name, String source, Map<String, Object> context, String expected, boolean error) {}

    @SuppressWarnings("unchecked")
    static List<Case> load(Path dir, String qwen3Template) throws IOException {
        ObjectMapper json = new ObjectMapper();
        List<Case> out = new ArrayList<>();
        for (String f : List.of("features-goldens.json", "fuzz-goldens.json")) {
            Map<String, Object> g = json.readValue(dir.resolve(f).toFile(), Map.class);
            for (Map<String, Object> c : (List<Map<String, Object>>) g.get("cases")) {
                out.add(new Case(f, (String) c.get("name"), (String) c.get("source"), (Map<String, Object>) c.get("context"),
                        (String) c.get("expected"), c.containsKey("error")));
            }
        }
        Map<String, String> chat = new LinkedHashMap<>();
        chat.put("llama3-goldens.json", Files.readString(dir.resolve("llama3-style.jinja")));
        if (qwen3Template != null) chat.put("qwen3-goldens.json", qwen3Template);
        for (Map.Entry<String, String> e : chat.entrySet()) {
            Map<String, Object> g = json.readValue(dir.resolve(e.getKey()).toFile(), Map.class);
            for (Map<String, Object> c : (List<Map<String, Object>>) g.get("cases")) {
                // the variables apply_chat_template passes, as ChatTemplate.render does
                Map<String, Object> ctx = new HashMap<>();
                ctx.put("tools", null);
                ctx.put("documents", null);
                if (c.get("extra") != null) ctx.putAll((Map<String, Object>) c.get("extra"));
                ctx.put("messages", c.get("messages"));
                ctx.put("add_generation_prompt", c.get("add_generation_prompt"));
                out.add(new Case(e.getKey(), (String) c.get("name"), e.getValue(), ctx, (String) c.get("expected"),
                        c.containsKey("error")));
            }
        }
        return out;
    }

    private static String shown(String s, int n) {
        String t = s == null ? "null" : s.replace("\n", "\\n").replace("\t", "\\t");
        return t.length() > n ? t.substring(0, n) + "..." : t;
    }

    /** args: [path of the Qwen3 tokenizer_config.json]; writes each mismatch to target/compare-mismatches.txt. */
    @SuppressWarnings("unchecked")
    public static void main(String[] args) throws Exception {
        // run from this folder or from the repository root
        Path home = Files.isDirectory(Path.of("src/main/java/dev/drmas/compare")) ? Path.of(".") : Path.of("java/chat-template/compare");
        Path dir = home.resolve("../src/test/resources/chat-templates");
        String qwen3 = args.length > 0
                ? (String) new ObjectMapper().readValue(Path.of(args[0]).toFile(), Map.class).get("chat_template") : null;
        List<Case> cases = load(dir, qwen3);
        Map<String, Engine> engines = new LinkedHashMap<>();
        engines.put("Jinjava 2.8.4", jinjava(false));
        engines.put("Jinjava 2.8.4, LegacyOverrides.ALL", jinjava(true));
        engines.put("Pebble 4.0.0", pebble());
        Path report = home.resolve("target").resolve("compare-mismatches.txt");
        Files.createDirectories(report.getParent());
        try (PrintWriter mismatches = new PrintWriter(Files.newBufferedWriter(report))) {
            for (Map.Entry<String, Engine> en : engines.entrySet()) {
                Map<String, int[]> tally = new TreeMap<>(); // file -> {matches, cases}
                for (Case c : cases) {
                    int[] t = tally.computeIfAbsent(c.file(), k -> new int[2]);
                    t[1]++;
                    String out = null;
                    String err = null;
                    try {
                        out = en.getValue().render(c.source(), new HashMap<>(c.context() == null ? Map.of() : c.context()));
                    } catch (Exception | StackOverflowError x) {
                        err = x.getClass().getSimpleName() + ": " + String.valueOf(x.getMessage()).split("\n")[0];
                    }
                    // an error case matches when the engine fails at all, whatever its message
                    boolean ok = c.error() ? err != null : err == null && out.equals(c.expected());
                    if (ok) {
                        t[0]++;
                    } else {
                        mismatches.println(en.getKey() + " | " + c.file() + " | " + c.name() + " | source: "
                                + shown(c.source(), 160) + " | jinja2: " + (c.error() ? "<error>" : shown(c.expected(), 120))
                                + " | got: " + (err != null ? "<" + shown(err, 160) + ">" : shown(out, 120)));
                    }
                }
                StringBuilder line = new StringBuilder(en.getKey() + ":");
                tally.forEach((f, t) -> line.append("  ").append(f).append(' ').append(t[0]).append('/').append(t[1]));
                System.out.println(line);
            }
        }
        System.out.println("mismatches: " + report.toAbsolutePath().normalize());
    }
}
