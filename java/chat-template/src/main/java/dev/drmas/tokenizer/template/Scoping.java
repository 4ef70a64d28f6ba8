// Scoping.java — jinja2 decides at compile time which frame (template, loop body, macro, block)
// owns each variable (idtracking.py). Lookups here are dynamic, which agrees with jinja2 except
// for one case: a frame that assigns a name before reading it, with no enclosing frame knowing
// the name, starts with that name *undefined* — so a loop body reading `a` before a later
// top-level `{% set a %}` sees undefined even if the context has `a`. This pass finds those names
// per frame, mirroring jinja2's symbol analysis; the interpreter pre-sets them to Undefined.
package dev.drmas.tokenizer.template;

import dev.drmas.tokenizer.template.Node.*;
import java.util.HashMap;
import java.util.HashSet;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

final class Scoping {
    private enum Load { PARAM, RESOLVE, ALIAS, UNDEFINED }

    /** jinja2's Symbols: the names a frame owns and how each gets its value at frame entry. */
    private static final class Symbols {
        final Symbols parent;
        Map<String, Load> refs = new HashMap<>();
        Set<String> stores = new HashSet<>();

        Symbols(Symbols parent) {
            this.parent = parent;
        }

        Symbols copy() {
            Symbols s = new Symbols(parent);
            s.refs = new HashMap<>(refs);
            s.stores = new HashSet<>(stores);
            return s;
        }

        boolean hasRef(String name) {
            for (Symbols s = this; s != null; s = s.parent) {
                if (s.refs.containsKey(name)) return true;
            }
            return false;
        }

        void load(String name) {
            if (!hasRef(name)) refs.put(name, Load.RESOLVE);
        }

        void store(String name) {
            stores.add(name);
            if (!refs.containsKey(name)) refs.put(name, parent != null && parent.hasRef(name) ? Load.ALIAS : Load.UNDEFINED);
        }

        void param(String name) {
            stores.add(name);
            refs.put(name, Load.PARAM);
        }

        /** After an if: names first assigned in a branch keep their outer value (or the context's). */
        void branchUpdate(List<Symbols> branches) {
            Set<String> branchStores = new HashSet<>();
            for (Symbols b : branches) branchStores.addAll(b.stores);
            branchStores.removeAll(stores);
            for (Symbols b : branches) {
                refs.putAll(b.refs);
                stores.addAll(b.stores);
            }
            for (String name : branchStores) {
                refs.put(name, parent != null && parent.hasRef(name) ? Load.ALIAS : Load.RESOLVE);
            }
        }

        Set<String> undefinedAtEntry() {
            Set<String> out = new HashSet<>();
            refs.forEach((name, load) -> {
                if (load == Load.UNDEFINED) out.add(name);
            });
            return out;
        }
    }

    /** Frame-owning node (the root body list, a For, a Macro, ...) → names undefined at its entry. */
    private final Map<Object, Set<String>> undefinedAtEntry = new IdentityHashMap<>();
    /** Same for the else body of a For, which is a frame of its own. */
    private final Map<For, Set<String>> elseUndefined = new IdentityHashMap<>();

    static Scoping analyze(List<Stmt> root) {
        Scoping s = new Scoping();
        Symbols sym = new Symbols(null);
        s.visitAll(root, sym);
        s.undefinedAtEntry.put(root, sym.undefinedAtEntry());
        s.children(root, sym);
        return s;
    }

    Set<String> atEntry(Object frameNode) {
        return undefinedAtEntry.getOrDefault(frameNode, Set.of());
    }

    Set<String> atElseEntry(For f) {
        return elseUndefined.getOrDefault(f, Set.of());
    }

    // ---- one frame's symbols, in evaluation order (jinja2's FrameSymbolVisitor) ------------------

    private void visitAll(List<Stmt> body, Symbols sym) {
        for (Stmt st : body) visit(st, sym);
    }

    private void visit(Stmt st, Symbols sym) {
        switch (st) {
            case Text t -> { }
            case Print p -> expr(p.value(), sym);
            case If f -> visitIf(f.tests(), f.bodies(), f.otherwise(), 0, sym);
            case For f -> expr(f.iter(), sym); // the body is a frame of its own
            case Node.Set s -> {
                expr(s.value(), sym);
                target(s.target(), sym);
            }
            case SetBlock s -> target(s.target(), sym);
            case Macro m -> sym.store(m.name());
            case CallBlock c -> expr(c.call(), sym);
            case FilterBlock f -> expr(f.filter(), sym);
            case Scoped w -> w.values().forEach(v -> expr(v, sym));
            case Break b -> { }
            case Continue c -> { }
        }
    }

    /** jinja2 models elif as a nested If: body, the elifs together, else — each on a copy. */
    private void visitIf(List<Expr> tests, List<List<Stmt>> bodies, List<Stmt> otherwise, int from, Symbols sym) {
        expr(tests.get(from), sym);
        Symbols body = sym.copy();
        visitAll(bodies.get(from), body);
        Symbols elifs = sym.copy();
        for (int i = from + 1; i < tests.size(); i++) {
            visitIf(List.of(tests.get(i)), List.of(bodies.get(i)), List.of(), 0, elifs);
        }
        Symbols orElse = sym.copy();
        visitAll(otherwise, orElse);
        sym.branchUpdate(List.of(body, elifs, orElse));
    }

    private void target(Expr t, Symbols sym) {
        switch (t) {
            case Name n -> sym.store(n.name());
            case TupleLit tl -> tl.items().forEach(i -> target(i, sym));
            case NsRef r -> sym.load(r.name());
            default -> { }
        }
    }

    private void params(Expr t, Symbols sym) {
        if (t instanceof Name n) sym.param(n.name());
        if (t instanceof TupleLit tl) tl.items().forEach(i -> params(i, sym));
    }

    private void expr(Expr e, Symbols sym) {
        if (e == null) return;
        switch (e) {
            case Name n -> sym.load(n.name());
            case Const c -> { }
            case ListLit l -> l.items().forEach(x -> expr(x, sym));
            case TupleLit t -> t.items().forEach(x -> expr(x, sym));
            case DictLit d -> {
                for (int i = 0; i < d.keys().size(); i++) {
                    expr(d.keys().get(i), sym);
                    expr(d.values().get(i), sym);
                }
            }
            case GetAttr g -> expr(g.obj(), sym);
            case GetItem g -> {
                expr(g.obj(), sym);
                expr(g.key(), sym);
            }
            case Slice s -> {
                expr(s.start(), sym);
                expr(s.stop(), sym);
                expr(s.step(), sym);
            }
            case Call c -> {
                expr(c.fn(), sym);
                args(c.args(), sym);
            }
            case Filter f -> {
                expr(f.value(), sym);
                args(f.args(), sym);
            }
            case Test t -> {
                expr(t.value(), sym);
                args(t.args(), sym);
            }
            case Not n -> expr(n.value(), sym);
            case Unary u -> expr(u.value(), sym);
            case BinOp b -> {
                expr(b.left(), sym);
                expr(b.right(), sym);
            }
            case Concat c -> c.parts().forEach(x -> expr(x, sym));
            case Logic l -> {
                expr(l.left(), sym);
                expr(l.right(), sym);
            }
            case Compare c -> {
                expr(c.first(), sym);
                c.rest().forEach(x -> expr(x, sym));
            }
            case CondExpr c -> {
                expr(c.test(), sym);
                expr(c.then(), sym);
                expr(c.otherwise(), sym);
            }
            case NsRef r -> sym.load(r.name());
        }
    }

    private void args(ArgList a, Symbols sym) {
        a.positional().forEach(x -> expr(x, sym));
        a.keyword().forEach(x -> expr(x, sym));
    }

    // ---- child frames, analysed with the whole parent frame known (as jinja2's codegen does) ---

    private void children(List<Stmt> body, Symbols parent) {
        for (Stmt st : body) {
            switch (st) {
                case If f -> {
                    for (List<Stmt> b : f.bodies()) children(b, parent);
                    children(f.otherwise(), parent);
                }
                case For f -> {
                    Symbols loop = new Symbols(parent);
                    loop.param("loop");
                    params(f.target(), loop);
                    frame(f, f.body(), loop);
                    if (!f.otherwise().isEmpty()) {
                        Symbols orElse = new Symbols(parent);
                        visitAll(f.otherwise(), orElse);
                        elseUndefined.put(f, orElse.undefinedAtEntry());
                        children(f.otherwise(), orElse);
                    }
                }
                case Macro m -> macro(m, parent);
                case CallBlock c -> macro(c.caller(), parent);
                case SetBlock s -> frame(s, s.body(), new Symbols(parent));
                case FilterBlock fb -> frame(fb, fb.body(), new Symbols(parent));
                case Scoped w -> {
                    Symbols inner = new Symbols(parent);
                    w.targets().forEach(t -> params(t, inner));
                    frame(w, w.body(), inner);
                }
                default -> { }
            }
        }
    }

    private void macro(Macro m, Symbols parent) {
        Symbols sym = new Symbols(parent);
        m.params().forEach(sym::param);
        for (String special : List.of("caller", "varargs", "kwargs")) sym.param(special);
        m.defaults().forEach(d -> expr(d, sym));
        frame(m, m.body(), sym);
    }

    private void frame(Object owner, List<Stmt> body, Symbols sym) {
        visitAll(body, sym);
        undefinedAtEntry.put(owner, sym.undefinedAtEntry());
        children(body, sym);
    }
}
