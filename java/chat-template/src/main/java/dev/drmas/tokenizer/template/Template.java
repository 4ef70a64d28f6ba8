// Template.java — a parsed Jinja template rendered with the semantics of HF transformers' chat
// template environment (jinja2 ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks,
// loopcontrols, HF's tojson/raise_exception/strftime_now). Parse once, render many times; a
// Template is immutable and safe to share between threads.
package dev.drmas.tokenizer.template;

import dev.drmas.tokenizer.template.Node.Stmt;
import java.time.Clock;
import java.util.List;
import java.util.Map;

public final class Template {
    private final SourceText source;
    private final List<Stmt> body;
    private final Scoping scoping;

    private Template(SourceText source, List<Stmt> body) {
        this.source = source;
        this.body = body;
        this.scoping = Scoping.analyze(body);
    }

    /** Parses source; a syntax error is a TemplateException naming line:col. */
    public static Template parse(String source) {
        SourceText src = SourceText.of(source);
        return new Template(src, Parser.parse(src));
    }

    /**
     * Renders with the given variables. Values are plain Java: Map (dict; use an insertion-ordered
     * map when order matters, as it does for tojson), List, String, Integer/Long, Double,
     * Boolean, null (None); anything else is an IllegalArgumentException naming the variable
     * path (e.g. messages[2]['content']). Template errors are TemplateExceptions naming line:col.
     */
    public String render(Map<String, Object> context) {
        return render(context, Clock.systemDefaultZone());
    }

    /** As render(context), with strftime_now reading the given clock (tests pin the date). */
    String render(Map<String, Object> context, Clock clock) {
        context.forEach((k, v) -> checkPlain(v, k));
        return new Interpreter(source, scoping).render(body, Builtins.globals(clock), context);
    }

    /** Rejects values the interpreter has no Python meaning for, naming where they are. */
    private static void checkPlain(Object v, String path) {
        if (v == null || v instanceof String || v instanceof Boolean || Py.isInt(v) || Py.isFloat(v)) return;
        if (v instanceof List<?> l) {
            for (int i = 0; i < l.size(); i++) checkPlain(l.get(i), path + "[" + i + "]");
        } else if (v instanceof Map<?, ?> m) {
            m.forEach((k, x) -> {
                if (!(k == null || k instanceof String || k instanceof Boolean || Py.isInt(k) || Py.isFloat(k))) {
                    throw new IllegalArgumentException("template variable " + path + " has a key of type "
                            + k.getClass().getName() + "; keys must be String, a number, Boolean or null");
                }
                checkPlain(x, path + "[" + Py.repr(k) + "]");
            });
        } else {
            throw new IllegalArgumentException("template variable " + path + " is a " + v.getClass().getName()
                    + "; values must be Map, List, String, Integer/Long, Double, Boolean or null");
        }
    }
}
