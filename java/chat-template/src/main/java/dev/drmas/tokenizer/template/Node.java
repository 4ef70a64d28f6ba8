// Node.java — the syntax tree: expressions and statements of the Jinja subset HF chat templates
// use, mirroring jinja2's nodes so that the evaluator can follow jinja2's semantics one node at a
// time. `at` is the source offset of the node's token, for line:col in errors.
package dev.drmas.tokenizer.template;

import java.util.List;

final class Node {
    private Node() {}

    sealed interface Expr permits Const, Name, ListLit, TupleLit, DictLit, GetAttr, GetItem, Slice, Call, Filter,
            Test, Not, Unary, BinOp, Concat, Logic, Compare, CondExpr, NsRef {
        int at();
    }

    record Const(int at, Object value) implements Expr {}

    record Name(int at, String name) implements Expr {}

    record ListLit(int at, List<Expr> items) implements Expr {}

    record TupleLit(int at, List<Expr> items) implements Expr {}

    record DictLit(int at, List<Expr> keys, List<Expr> values) implements Expr {}

    record GetAttr(int at, Expr obj, String name) implements Expr {}

    /** obj[key]; key may be a Slice. */
    record GetItem(int at, Expr obj, Expr key) implements Expr {}

    /** start:stop:step inside brackets; absent parts are null. */
    record Slice(int at, Expr start, Expr stop, Expr step) implements Expr {}

    record ArgList(List<Expr> positional, List<String> names, List<Expr> keyword) {
        static final ArgList NONE = new ArgList(List.of(), List.of(), List.of());
    }

    record Call(int at, Expr fn, ArgList args) implements Expr {}

    /** value|name(args); value is null for the innermost filter of a filter block or a set block. */
    record Filter(int at, Expr value, String name, ArgList args) implements Expr {}

    record Test(int at, Expr value, String name, ArgList args) implements Expr {}

    record Not(int at, Expr value) implements Expr {}

    /** Unary minus or plus. */
    record Unary(int at, boolean minus, Expr value) implements Expr {}

    /** + - * / // % ** */
    record BinOp(int at, String op, Expr left, Expr right) implements Expr {}

    /** a ~ b ~ c: the str() of each part, joined. */
    record Concat(int at, List<Expr> parts) implements Expr {}

    record Logic(int at, boolean and, Expr left, Expr right) implements Expr {}

    /** Chained comparison a < b <= c; ops are ==, !=, <, <=, >, >=, in, notin. */
    record Compare(int at, Expr first, List<String> ops, List<Expr> rest) implements Expr {}

    /** a if test else b; otherwise is null when there is no else. */
    record CondExpr(int at, Expr test, Expr then, Expr otherwise) implements Expr {}

    /** The target ns.attr of `set`, only valid on namespace() objects. */
    record NsRef(int at, String name, String attr) implements Expr {}

    sealed interface Stmt permits Text, Print, If, For, Set, SetBlock, Macro, CallBlock, FilterBlock, Scoped, Break,
            Continue {}

    record Text(String text) implements Stmt {}

    record Print(int at, Expr value) implements Stmt {}

    /** if/elif chain: tests[i] guards bodies[i]; otherwise is the else body (possibly empty). */
    record If(int at, List<Expr> tests, List<List<Stmt>> bodies, List<Stmt> otherwise) implements Stmt {}

    record For(int at, Expr target, Expr iter, Expr filter, List<Stmt> body, List<Stmt> otherwise) implements Stmt {}

    record Set(int at, Expr target, Expr value) implements Stmt {}

    /** {% set x %}body{% endset %}, optionally {% set x | filter %}. */
    record SetBlock(int at, Expr target, Filter filter, List<Stmt> body) implements Stmt {}

    /**
     * A macro definition (or the anonymous `caller` of a call block): defaults has one entry per
     * param, null where there is none; the flags say whether the body reads varargs/kwargs/caller,
     * which is when jinja2 accepts extra arguments.
     */
    record Macro(int at, String name, List<String> params, List<Expr> defaults, List<Stmt> body,
            boolean usesVarargs, boolean usesKwargs, boolean usesCaller) implements Stmt {}

    /** {% call(params) fn(args) %}body{% endcall %}: fn is called with caller = the body as a macro. */
    record CallBlock(int at, Call call, Macro caller) implements Stmt {}

    record FilterBlock(int at, Filter filter, List<Stmt> body) implements Stmt {}

    /** A body run in its own scope: {% with a = 1 %} and HF's {% generation %}. */
    record Scoped(int at, List<Expr> targets, List<Expr> values, List<Stmt> body) implements Stmt {}

    record Break(int at) implements Stmt {}

    record Continue(int at) implements Stmt {}
}
