// Interpreter.java — walks the syntax tree with jinja2's runtime rules: scopes (a for-loop
// iteration, a macro call and a block have their own; `if` does not, so a `set` inside an `if`
// is seen after it), the loop object, namespace() assignment, macros with caller, break/continue.
// Python-level errors are tagged here with the line:col of the innermost node that raised them.
package dev.drmas.tokenizer.template;

import dev.drmas.tokenizer.template.Node.*;
import static dev.drmas.tokenizer.template.Values.MISSING;

import dev.drmas.tokenizer.template.Values.*;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

final class Interpreter {
    private enum Flow { NORMAL, BREAK, CONTINUE }

    private final SourceText src;
    private final Scoping scoping;

    Interpreter(SourceText src, Scoping scoping) {
        this.src = src;
        this.scoping = scoping;
    }

    /** A new frame's scope, with the names jinja2 starts out undefined there (see Scoping). */
    private static Scope enter(Scope parent, java.util.Set<String> undefinedAtEntry) {
        Scope s = new Scope(parent);
        for (String name : undefinedAtEntry) s.set(name, Undefined.name(name));
        return s;
    }

    /** A variable scope; lookups walk outwards, assignments stay local (as jinja2 frames do). */
    static final class Scope {
        private final Scope parent;
        private final Map<String, Object> vars = new HashMap<>();

        Scope(Scope parent) {
            this.parent = parent;
        }

        Object lookup(String name) {
            for (Scope s = this; s != null; s = s.parent) {
                if (s.vars.containsKey(name)) return s.vars.get(name);
            }
            return MISSING;
        }

        void set(String name, Object value) {
            vars.put(name, value);
        }
    }

    /** jinja2's `loop`: index, index0, revindex, revindex0, first, last, length, previtem, nextitem, cycle, changed. */
    static final class LoopContext {
        private final List<Object> items;
        private int index0;
        private Object lastChanged = MISSING;

        LoopContext(List<Object> items) {
            this.items = items;
        }

        Object attribute(String name) {
            int n = items.size();
            return switch (name) {
                case "index" -> (long) index0 + 1;
                case "index0" -> (long) index0;
                case "revindex" -> (long) (n - index0);
                case "revindex0" -> (long) (n - index0 - 1);
                case "first" -> index0 == 0;
                case "last" -> index0 == n - 1;
                case "length" -> (long) n;
                case "depth" -> 1L;
                case "depth0" -> 0L;
                case "previtem" -> index0 > 0 ? items.get(index0 - 1) : new Undefined("there is no previous item");
                case "nextitem" -> index0 + 1 < n ? items.get(index0 + 1) : new Undefined("there is no next item");
                case "cycle" -> (Callable) args -> {
                    if (args.positional().isEmpty()) throw new PyError("no items for cycling given");
                    return args.positional().get(index0 % args.positional().size());
                };
                case "changed" -> (Callable) args -> {
                    Tuple now = new Tuple(args.positional());
                    if (lastChanged != MISSING && Py.eq(lastChanged, now)) return false;
                    lastChanged = now;
                    return true;
                };
                default -> MISSING;
            };
        }

        @Override
        public String toString() {
            return "<LoopContext " + (index0 + 1) + "/" + items.size() + ">";
        }
    }

    /** A macro bound to the scope it was defined in; calling it renders its body to a string. */
    final class MacroValue implements Callable {
        private final Macro m;
        private final Scope closure;

        MacroValue(Macro m, Scope closure) {
            this.m = m;
            this.closure = closure;
        }

        String name() {
            return m.name();
        }

        @Override
        public Object call(Args args) {
            List<String> params = m.params();
            List<Object> pos = args.positional();
            if (pos.size() > params.size() && !m.usesVarargs()) {
                throw new PyError("macro '" + m.name() + "' takes not more than " + params.size() + " argument(s)");
            }
            Scope s = enter(closure, scoping.atEntry(m));
            // every parameter is local from the start: a default naming a later (or its own)
            // parameter sees it undefined rather than an outer variable, as in jinja2
            for (String p : params) s.set(p, Undefined.name(p));
            Map<String, Object> extra = new LinkedHashMap<>(args.keyword());
            for (int i = 0; i < params.size(); i++) {
                String p = params.get(i);
                if (i < pos.size()) {
                    if (extra.containsKey(p)) throw new PyError("macro '" + m.name() + "' got multiple values for argument '" + p + "'");
                    s.set(p, pos.get(i));
                } else if (extra.containsKey(p)) {
                    s.set(p, extra.remove(p));
                } else if (m.defaults().get(i) != null) {
                    s.set(p, eval(m.defaults().get(i), s)); // defaults see the parameters before them
                } else {
                    s.set(p, new Undefined("parameter '" + p + "' was not provided"));
                }
            }
            Object caller = extra.remove("caller");
            if (caller != null) s.set("caller", caller);
            if (!extra.isEmpty() && !m.usesKwargs()) {
                throw new PyError("macro '" + m.name() + "' takes no keyword argument '" + extra.keySet().iterator().next() + "'");
            }
            s.set("varargs", new Tuple(pos.size() > params.size() ? pos.subList(params.size(), pos.size()) : List.of()));
            s.set("kwargs", extra);
            StringBuilder out = new StringBuilder();
            exec(m.body(), s, out);
            return out.toString();
        }
    }

    String render(List<Stmt> body, Map<String, Object> globals, Map<String, Object> context) {
        Scope root = new Scope(null);
        root.vars.putAll(globals);
        Scope top = new Scope(root);
        top.vars.putAll(context);
        for (String name : scoping.atEntry(body)) top.set(name, Undefined.name(name));
        StringBuilder out = new StringBuilder();
        exec(body, top, out);
        return out.toString();
    }

    // ---- statements ---------------------------------------------------------------------------------

    private Flow exec(List<Stmt> body, Scope scope, StringBuilder out) {
        for (Stmt st : body) {
            Flow f = exec(st, scope, out);
            if (f != Flow.NORMAL) return f;
        }
        return Flow.NORMAL;
    }

    private Flow exec(Stmt st, Scope scope, StringBuilder out) {
        switch (st) {
            case Text t -> out.append(t.text());
            case Print p -> out.append(Py.str(eval(p.value(), scope)));
            case If f -> {
                for (int i = 0; i < f.tests().size(); i++) {
                    if (Py.truthy(eval(f.tests().get(i), scope))) return exec(f.bodies().get(i), scope, out);
                }
                return exec(f.otherwise(), scope, out);
            }
            case For f -> {
                return loop(f, scope, out);
            }
            case Set s -> assign(s.target(), eval(s.value(), scope), scope, s.at());
            case SetBlock s -> {
                StringBuilder b = new StringBuilder();
                exec(s.body(), enter(scope, scoping.atEntry(s)), b);
                Object v = s.filter() == null ? b.toString() : applyFilter(s.filter(), b.toString(), scope);
                assign(s.target(), v, scope, s.at());
            }
            case Macro m -> scope.set(m.name(), new MacroValue(m, scope));
            case CallBlock c -> out.append(Py.str(call(c.call(), scope, new MacroValue(c.caller(), scope))));
            case FilterBlock f -> {
                StringBuilder b = new StringBuilder();
                exec(f.body(), enter(scope, scoping.atEntry(f)), b);
                out.append(Py.str(applyFilter(f.filter(), b.toString(), scope)));
            }
            case Scoped w -> {
                Scope inner = enter(scope, scoping.atEntry(w));
                for (int i = 0; i < w.targets().size(); i++) {
                    assign(w.targets().get(i), eval(w.values().get(i), scope), inner, w.at());
                }
                return exec(w.body(), inner, out);
            }
            case Break b -> {
                return Flow.BREAK;
            }
            case Continue c -> {
                return Flow.CONTINUE;
            }
        }
        return Flow.NORMAL;
    }

    /**
     * A for loop: each iteration gets a fresh scope under the enclosing one (so a `set` in the body
     * is gone at the next iteration and after the loop, as in jinja2); the `if` filter runs before
     * counting, so loop.length and loop.last see only the kept items. The else body runs unless an
     * iteration reached the end of the body: jinja2 clears its flag there, so a loop whose every
     * iteration ends in continue or break still runs its else.
     */
    private Flow loop(For f, Scope scope, StringBuilder out) {
        Object iterable = eval(f.iter(), scope);
        List<Object> items;
        try {
            items = Py.toList(iterable);
        } catch (PyError e) {
            throw src.error(f.iter().at(), e.getMessage());
        }
        if (f.filter() != null) {
            List<Object> kept = new ArrayList<>();
            for (Object item : items) {
                Scope s = new Scope(scope);
                assign(f.target(), item, s, f.at());
                if (Py.truthy(eval(f.filter(), s))) kept.add(item);
            }
            items = kept;
        }
        LoopContext loop = new LoopContext(items);
        boolean completed = false;
        for (int i = 0; i < items.size(); i++) {
            loop.index0 = i;
            Scope s = enter(scope, scoping.atEntry(f));
            assign(f.target(), items.get(i), s, f.at());
            s.set("loop", loop);
            Flow flow = exec(f.body(), s, out);
            if (flow == Flow.NORMAL) completed = true;
            if (flow == Flow.BREAK) break;
        }
        // the else body is outside the loop: a break or continue there belongs to an enclosing loop
        return completed ? Flow.NORMAL : exec(f.otherwise(), enter(scope, scoping.atElseEntry(f)), out);
    }

    private void assign(Expr target, Object value, Scope scope, int at) {
        switch (target) {
            case Name n -> scope.set(n.name(), value);
            case NsRef r -> {
                Object ns = scope.lookup(r.name());
                if (!(ns instanceof Namespace namespace)) {
                    throw src.error(r.at(), "cannot assign attribute on non-namespace object ('" + r.name() + "' is "
                            + (ns == MISSING ? "undefined" : "a " + Py.typeName(ns)) + ")");
                }
                namespace.attrs.put(r.attr(), value);
            }
            case TupleLit t -> {
                List<Object> values;
                try {
                    values = Py.toList(value);
                } catch (PyError e) {
                    throw src.error(at, "cannot unpack non-iterable " + Py.typeName(value) + " object");
                }
                int n = t.items().size();
                if (values.size() < n) throw src.error(at, "not enough values to unpack (expected " + n + ", got " + values.size() + ")");
                if (values.size() > n) throw src.error(at, "too many values to unpack (expected " + n + ")");
                for (int i = 0; i < n; i++) assign(t.items().get(i), values.get(i), scope, at);
            }
            default -> throw src.error(at, "cannot assign to this expression");
        }
    }

    // ---- expressions --------------------------------------------------------------------------------

    /** Evaluates e; a Python-level error raised by e itself is reported at e's line:col. */
    Object eval(Expr e, Scope scope) {
        try {
            return evalNode(e, scope);
        } catch (RaisedByTemplate r) {
            throw new TemplateException(r.getMessage(), src.line(e.at()), src.column(e.at()), true);
        } catch (PyError err) {
            throw src.error(e.at(), err.getMessage());
        }
    }

    private Object evalNode(Expr e, Scope scope) {
        switch (e) {
            case Const c -> {
                return c.value();
            }
            case Name n -> {
                Object v = scope.lookup(n.name());
                return v == MISSING ? Undefined.name(n.name()) : v;
            }
            case ListLit l -> {
                List<Object> out = new ArrayList<>();
                for (Expr item : l.items()) out.add(eval(item, scope));
                return out;
            }
            case TupleLit t -> {
                List<Object> out = new ArrayList<>();
                for (Expr item : t.items()) out.add(eval(item, scope));
                return new Tuple(out);
            }
            case DictLit d -> {
                Map<Object, Object> out = new LinkedHashMap<>();
                for (int i = 0; i < d.keys().size(); i++) {
                    Object k = eval(d.keys().get(i), scope);
                    if (k instanceof List || k instanceof Map || k instanceof Undefined) {
                        throw src.error(d.keys().get(i).at(), "unhashable type: '" + Py.typeName(k) + "'");
                    }
                    out.put(k, eval(d.values().get(i), scope));
                }
                return out;
            }
            case GetAttr g -> {
                return Py.getattr(eval(g.obj(), scope), g.name());
            }
            case GetItem g -> {
                Object obj = eval(g.obj(), scope);
                if (g.key() instanceof Slice s) {
                    return Py.slice(obj, optional(s.start(), scope), optional(s.stop(), scope), optional(s.step(), scope));
                }
                return Py.getitem(obj, eval(g.key(), scope));
            }
            case Slice s -> throw new PyError("a slice is only allowed directly inside []");
            case Call c -> {
                return call(c, scope, null);
            }
            case Filter f -> {
                return applyFilter(f, null, scope);
            }
            case Test t -> {
                return Builtins.test(t.name(), eval(t.value(), scope), args(t.args(), scope));
            }
            case Not n -> {
                return !Py.truthy(eval(n.value(), scope));
            }
            case Unary u -> {
                return Py.negate(eval(u.value(), scope), u.minus());
            }
            case BinOp b -> {
                return Py.binary(b.op(), eval(b.left(), scope), eval(b.right(), scope));
            }
            case Concat c -> {
                StringBuilder b = new StringBuilder();
                for (Expr part : c.parts()) b.append(Py.str(eval(part, scope)));
                return b.toString();
            }
            case Logic l -> {
                // Python's and/or return an operand, not a bool
                Object left = eval(l.left(), scope);
                if (l.and()) return Py.truthy(left) ? eval(l.right(), scope) : left;
                return Py.truthy(left) ? left : eval(l.right(), scope);
            }
            case Compare c -> {
                Object left = eval(c.first(), scope);
                for (int i = 0; i < c.ops().size(); i++) {
                    Object right = eval(c.rest().get(i), scope);
                    if (!Py.compare(c.ops().get(i), left, right)) return false;
                    left = right;
                }
                return true;
            }
            case CondExpr c -> {
                if (Py.truthy(eval(c.test(), scope))) return eval(c.then(), scope);
                if (c.otherwise() != null) return eval(c.otherwise(), scope);
                return new Undefined("the inline if-expression on line " + src.line(c.at())
                        + " evaluated to false and no else section was defined.");
            }
            case NsRef r -> throw new PyError("'" + r.name() + "." + r.attr() + "' can only be assigned to");
        }
    }

    private Object optional(Expr e, Scope scope) {
        return e == null ? null : eval(e, scope);
    }

    private Args args(ArgList a, Scope scope) {
        if (a.positional().isEmpty() && a.keyword().isEmpty()) return Args.NONE;
        List<Object> pos = new ArrayList<>();
        for (Expr x : a.positional()) pos.add(eval(x, scope));
        Map<String, Object> kw = new LinkedHashMap<>();
        for (int i = 0; i < a.names().size(); i++) {
            if (kw.containsKey(a.names().get(i))) {
                throw src.error(a.keyword().get(i).at(), "keyword argument repeated: " + a.names().get(i));
            }
            kw.put(a.names().get(i), eval(a.keyword().get(i), scope));
        }
        return new Args(pos, kw);
    }

    private Object call(Call c, Scope scope, MacroValue caller) {
        Object fn = eval(c.fn(), scope);
        Args args = args(c.args(), scope);
        if (caller != null) {
            Map<String, Object> kw = new LinkedHashMap<>(args.keyword());
            kw.put("caller", caller);
            args = new Args(args.positional(), kw);
        }
        try {
            if (fn instanceof Undefined u) throw u.fail();
            if (fn instanceof Callable k) return k.call(args);
            throw new PyError("'" + Py.typeName(fn) + "' object is not callable");
        } catch (RaisedByTemplate r) {
            throw new TemplateException(r.getMessage(), src.line(c.at()), src.column(c.at()), true);
        } catch (PyError err) {
            throw src.error(c.at(), err.getMessage());
        }
    }

    /** f applied to its input: the value expression, or blockValue at the bottom of a filter/set block chain. */
    private Object applyFilter(Filter f, Object blockValue, Scope scope) {
        Object v = f.value() == null ? blockValue
                : f.value() instanceof Filter inner ? applyFilter(inner, blockValue, scope) : eval(f.value(), scope);
        Args args = args(f.args(), scope);
        try {
            return Builtins.filter(f.name(), v, args);
        } catch (PyError err) {
            throw src.error(f.at(), err.getMessage());
        }
    }
}
