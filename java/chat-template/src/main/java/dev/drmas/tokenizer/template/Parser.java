// Parser.java — tokens to syntax tree, by jinja2's own grammar (parser.py): the same precedence
// ladder (condexpr > or > and > not > compare > + - > ~ > * / // % > ** > unary > filters/tests),
// the same tuple rules and statement set, so that odd but legal templates parse as they do in HF.
package dev.drmas.tokenizer.template;

import dev.drmas.tokenizer.template.Lexer.Kind;
import dev.drmas.tokenizer.template.Lexer.Token;
import dev.drmas.tokenizer.template.Node.*;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.HashSet;
import java.util.List;

final class Parser {
    private final SourceText src;
    private final List<Token> tokens;
    private int i;
    private int loopDepth;
    /** The block tags being parsed, innermost first, to say which one an early end left open. */
    private final Deque<Token> openBlocks = new ArrayDeque<>();
    /** Names read inside each macro body being parsed (for varargs/kwargs/caller). */
    private final Deque<java.util.Set<String>> macroNames = new ArrayDeque<>();

    private Parser(SourceText src, List<Token> tokens) {
        this.src = src;
        this.tokens = tokens;
    }

    static List<Stmt> parse(SourceText src) {
        return new Parser(src, Lexer.tokenize(src)).subparse(List.of());
    }

    // ---- token stream --------------------------------------------------------------------

    private Token cur() {
        return tokens.get(i);
    }

    private Token look() {
        return tokens.get(Math.min(i + 1, tokens.size() - 1));
    }

    private Token next() {
        Token t = tokens.get(i);
        if (t.kind() != Kind.EOF) i++;
        return t;
    }

    private boolean skipOp(String op) {
        if (cur().isOp(op)) {
            i++;
            return true;
        }
        return false;
    }

    private boolean skipName(String name) {
        if (cur().isName(name)) {
            i++;
            return true;
        }
        return false;
    }

    private TemplateException fail(Token t, String reason) {
        return src.error(t.at(), reason);
    }

    static String describe(Token t) {
        return switch (t.kind()) {
            case BLOCK_END -> "end of statement block";
            case VAR_END -> "end of print statement";
            case EOF -> "end of template";
            case STRING -> "string";
            case DATA -> "template data";
            case BLOCK_BEGIN -> "begin of statement block";
            case VAR_BEGIN -> "begin of print statement";
            default -> t.text();
        };
    }

    private Token expect(Kind kind, String what) {
        Token t = cur();
        if (t.kind() != kind) throw fail(t, "expected " + what + ", got '" + describe(t) + "'");
        return next();
    }

    private void expectOp(String op) {
        if (!skipOp(op)) throw fail(cur(), "expected '" + op + "', got '" + describe(cur()) + "'");
    }

    private Token expectName(String name) {
        if (!cur().isName(name)) throw fail(cur(), "expected '" + name + "', got '" + describe(cur()) + "'");
        return next();
    }

    // ---- statements -----------------------------------------------------------------------

    /** Template data and tags until a block tag whose name is in endTags (left current). */
    private List<Stmt> subparse(List<String> endTags) {
        List<Stmt> body = new ArrayList<>();
        while (true) {
            Token t = cur();
            switch (t.kind()) {
                case DATA -> {
                    body.add(new Text(t.text()));
                    next();
                }
                case VAR_BEGIN -> {
                    next();
                    Expr e = parseTuple(true, List.of(), false);
                    body.add(new Print(e.at(), e));
                    expect(Kind.VAR_END, "end of print statement");
                }
                case BLOCK_BEGIN -> {
                    next();
                    if (cur().kind() == Kind.NAME && endTags.contains(cur().text())) return body;
                    body.add(statement());
                    expect(Kind.BLOCK_END, "end of statement block");
                }
                case EOF -> {
                    if (!endTags.isEmpty()) {
                        Token open = openBlocks.peek();
                        throw fail(t, "unexpected end of template: the '" + open.text() + "' block opened at line "
                                + src.line(open.at()) + ":" + src.column(open.at()) + " needs "
                                + String.join(" or ", endTags.stream().map(x -> "'" + x + "'").toList()));
                    }
                    return body;
                }
                default -> throw fail(t, "unexpected '" + describe(t) + "'");
            }
        }
    }

    /** Statements up to one of endTags; consumes the block end of the opening tag first. */
    private List<Stmt> statements(List<String> endTags, boolean dropNeedle) {
        skipOp(":");
        expect(Kind.BLOCK_END, "end of statement block");
        List<Stmt> body = subparse(endTags);
        if (dropNeedle) next();
        return body;
    }

    private Stmt statement() {
        Token t = cur();
        if (t.kind() != Kind.NAME) throw fail(t, "tag name expected, got '" + describe(t) + "'");
        openBlocks.push(t);
        Stmt st = statementOf(t);
        openBlocks.pop();
        return st;
    }

    private Stmt statementOf(Token t) {
        return switch (t.text()) {
            case "if" -> parseIf();
            case "for" -> parseFor();
            case "set" -> parseSet();
            case "macro" -> parseMacro();
            case "call" -> parseCallBlock();
            case "filter" -> parseFilterBlock();
            case "with" -> parseWith();
            case "generation" -> parseGeneration();
            case "break", "continue" -> {
                next();
                if (loopDepth == 0) throw fail(t, "'" + t.text() + "' outside of a for loop");
                yield t.text().equals("break") ? new Break(t.at()) : new Continue(t.at());
            }
            case "include", "import", "from", "extends", "block", "autoescape", "do", "print" ->
                    throw fail(t, "tag '" + t.text() + "' is not supported in chat templates");
            default -> {
                // openBlocks holds t itself first, then the block it appeared in
                Token open = openBlocks.size() > 1 ? openBlocks.stream().skip(1).findFirst().get() : null;
                throw fail(t, "unexpected tag '" + t.text() + "'" + (open == null ? "" : " inside the '" + open.text()
                        + "' block opened at line " + src.line(open.at()) + ":" + src.column(open.at())));
            }
        };
    }

    private Stmt parseIf() {
        int at = next().at();
        List<Expr> tests = new ArrayList<>();
        List<List<Stmt>> bodies = new ArrayList<>();
        List<Stmt> otherwise = List.of();
        while (true) {
            tests.add(parseTuple(false, List.of(), false));
            bodies.add(statements(List.of("elif", "else", "endif"), false));
            Token t = next();
            if (t.isName("elif")) continue;
            if (t.isName("else")) otherwise = statements(List.of("endif"), true);
            return new If(at, tests, bodies, otherwise);
        }
    }

    private Stmt parseFor() {
        int at = next().at();
        Expr target = assignTarget(List.of("in"), false);
        expectName("in");
        Expr iter = parseTuple(false, List.of("recursive"), false);
        Expr filter = skipName("if") ? expression(true) : null;
        if (cur().isName("recursive")) throw fail(cur(), "recursive for loops are not supported");
        loopDepth++;
        List<Stmt> body = statements(List.of("endfor", "else"), false);
        loopDepth--;
        List<Stmt> otherwise = next().isName("else") ? statements(List.of("endfor"), true) : List.of();
        return new For(at, target, iter, filter, body, otherwise);
    }

    private Stmt parseSet() {
        int at = next().at();
        Expr target = assignTarget(List.of(), true);
        if (skipOp("=")) return new Set(at, target, parseTuple(true, List.of(), false));
        Filter filter = cur().isOp("|") ? filterChain(null, false) : null;
        List<Stmt> body = statements(List.of("endset"), true);
        return new SetBlock(at, target, filter, body);
    }

    private Stmt parseMacro() {
        int at = next().at();
        String name = expect(Kind.NAME, "macro name").text();
        List<String> params = new ArrayList<>();
        List<Expr> defaults = new ArrayList<>();
        signature(params, defaults);
        return macroBody(at, name, params, defaults, "endmacro");
    }

    /** The body up to endTag, noting which of varargs/kwargs/caller it reads; loops start afresh. */
    private Macro macroBody(int at, String name, List<String> params, List<Expr> defaults, String endTag) {
        macroNames.push(new HashSet<>());
        int savedLoops = loopDepth;
        loopDepth = 0;
        List<Stmt> body = statements(List.of(endTag), true);
        loopDepth = savedLoops;
        java.util.Set<String> seen = macroNames.pop();
        return new Macro(at, name, params, defaults, body, seen.contains("varargs"), seen.contains("kwargs"),
                seen.contains("caller"));
    }

    private void signature(List<String> params, List<Expr> defaults) {
        expectOp("(");
        while (!cur().isOp(")")) {
            if (!params.isEmpty()) expectOp(",");
            Token p = expect(Kind.NAME, "parameter name");
            if (skipOp("=")) {
                defaults.add(expression(true));
            } else if (defaults.stream().anyMatch(d -> d != null)) {
                throw fail(p, "non-default argument follows default argument");
            } else {
                defaults.add(null);
            }
            params.add(p.text());
        }
        expectOp(")");
    }

    private Stmt parseCallBlock() {
        int at = next().at();
        List<String> params = new ArrayList<>();
        List<Expr> defaults = new ArrayList<>();
        if (cur().isOp("(")) signature(params, defaults);
        Token callStart = cur();
        if (!(expression(true) instanceof Call call)) throw fail(callStart, "expected a macro call after 'call'");
        return new CallBlock(at, call, macroBody(at, "caller", params, defaults, "endcall"));
    }

    private Stmt parseFilterBlock() {
        int at = next().at();
        Filter filter = filterChain(null, true);
        return new FilterBlock(at, filter, statements(List.of("endfilter"), true));
    }

    private Stmt parseWith() {
        int at = next().at();
        List<Expr> targets = new ArrayList<>();
        List<Expr> values = new ArrayList<>();
        while (cur().kind() != Kind.BLOCK_END) {
            if (!targets.isEmpty()) expectOp(",");
            targets.add(assignTarget(List.of(), false));
            expectOp("=");
            values.add(expression(true));
        }
        return new Scoped(at, targets, values, statements(List.of("endwith"), true));
    }

    /** HF's AssistantTracker tag: renders its body unchanged (in its own scope, as a call block). */
    private Stmt parseGeneration() {
        int at = next().at();
        return new Scoped(at, List.of(), List.of(), statements(List.of("endgeneration"), true));
    }

    /** Name, tuple of names, or (withNamespace) ns.attr — jinja2's parse_assign_target. */
    private Expr assignTarget(List<String> extraEnd, boolean withNamespace) {
        Token t = cur();
        if (withNamespace && t.kind() == Kind.NAME && look().isOp(".")) {
            next();
            next();
            return new NsRef(t.at(), t.text(), expect(Kind.NAME, "attribute name").text());
        }
        Expr target = parseTuple(true, extraEnd, false, true);
        checkAssignable(target, t);
        return target;
    }

    private void checkAssignable(Expr e, Token t) {
        if (e instanceof TupleLit tl) {
            for (Expr item : tl.items()) checkAssignable(item, t);
        } else if (!(e instanceof Name)) {
            throw fail(t, "can't assign to '" + t.text() + "'");
        }
    }

    // ---- expressions ----------------------------------------------------------------------

    private boolean isTupleEnd(List<String> extraEnd) {
        Token t = cur();
        if (t.kind() == Kind.VAR_END || t.kind() == Kind.BLOCK_END || t.isOp(")")) return true;
        return t.kind() == Kind.NAME && extraEnd.contains(t.text());
    }

    /**
     * jinja2's parse_tuple: a comma makes a tuple; simplified (assignment targets) parses
     * primaries only; with condexpr off, `a if b else c` is not allowed at the top.
     */
    private Expr parseTuple(boolean withCondexpr, List<String> extraEnd, boolean explicitParens) {
        return parseTuple(withCondexpr, extraEnd, explicitParens, false);
    }

    private Expr parseTuple(boolean withCondexpr, List<String> extraEnd, boolean explicitParens, boolean simplified) {
        int at = cur().at();
        List<Expr> items = new ArrayList<>();
        boolean isTuple = false;
        while (true) {
            if (!items.isEmpty()) expectOp(",");
            if (isTupleEnd(extraEnd)) break;
            items.add(simplified ? primary() : expression(withCondexpr));
            if (cur().isOp(",")) {
                isTuple = true;
            } else {
                break;
            }
        }
        if (!isTuple) {
            if (!items.isEmpty()) return items.get(0);
            if (!explicitParens) throw fail(cur(), "expected an expression, got '" + describe(cur()) + "'");
        }
        return new TupleLit(at, items);
    }

    private Expr expression(boolean withCondexpr) {
        return withCondexpr ? condExpr() : or();
    }

    private Expr condExpr() {
        Expr expr = or();
        while (cur().isName("if")) {
            int at = next().at();
            Expr test = or();
            Expr otherwise = skipName("else") ? condExpr() : null;
            expr = new CondExpr(at, test, expr, otherwise);
        }
        return expr;
    }

    private Expr or() {
        Expr left = and();
        while (cur().isName("or")) {
            int at = next().at();
            left = new Logic(at, false, left, and());
        }
        return left;
    }

    private Expr and() {
        Expr left = not();
        while (cur().isName("and")) {
            int at = next().at();
            left = new Logic(at, true, left, not());
        }
        return left;
    }

    private Expr not() {
        if (cur().isName("not")) {
            int at = next().at();
            return new Not(at, not());
        }
        return compare();
    }

    private Expr compare() {
        Expr first = math1();
        List<String> ops = new ArrayList<>();
        List<Expr> rest = new ArrayList<>();
        int at = cur().at();
        while (true) {
            Token t = cur();
            if (t.kind() == Kind.OP && List.of("==", "!=", "<", "<=", ">", ">=").contains(t.text())) {
                next();
                ops.add(t.text());
            } else if (t.isName("in")) {
                next();
                ops.add("in");
            } else if (t.isName("not") && look().isName("in")) {
                next();
                next();
                ops.add("notin");
            } else {
                break;
            }
            rest.add(math1());
        }
        return ops.isEmpty() ? first : new Compare(at, first, ops, rest);
    }

    private Expr math1() {
        Expr left = concat();
        while (cur().isOp("+") || cur().isOp("-")) {
            Token op = next();
            left = new BinOp(op.at(), op.text(), left, concat());
        }
        return left;
    }

    private Expr concat() {
        Expr first = math2();
        if (!cur().isOp("~")) return first;
        int at = cur().at();
        List<Expr> parts = new ArrayList<>(List.of(first));
        while (skipOp("~")) parts.add(math2());
        return new Concat(at, parts);
    }

    private Expr math2() {
        Expr left = pow();
        while (cur().kind() == Kind.OP && List.of("*", "/", "//", "%").contains(cur().text())) {
            Token op = next();
            left = new BinOp(op.at(), op.text(), left, pow());
        }
        return left;
    }

    /** Left-associative, as in jinja2 (2**3**2 is 64 there, unlike Python). */
    private Expr pow() {
        Expr left = unary(true);
        while (cur().isOp("**")) {
            Token op = next();
            left = new BinOp(op.at(), "**", left, unary(true));
        }
        return left;
    }

    /** A sign binds tighter than filters: -x|abs is abs(-x). */
    private Expr unary(boolean withFilter) {
        Token t = cur();
        Expr node;
        if (t.isOp("-") || t.isOp("+")) {
            next();
            node = new Unary(t.at(), t.isOp("-"), unary(false));
        } else {
            node = primary();
        }
        node = postfix(node);
        return withFilter ? filterExpr(node) : node;
    }

    private Expr primary() {
        Token t = cur();
        switch (t.kind()) {
            case NAME -> {
                next();
                return switch (t.text()) {
                    case "true", "True" -> new Const(t.at(), Boolean.TRUE);
                    case "false", "False" -> new Const(t.at(), Boolean.FALSE);
                    case "none", "None" -> new Const(t.at(), null);
                    default -> {
                        // like jinja2's find_undeclared, a use in a nested macro or call block counts too
                        for (java.util.Set<String> names : macroNames) names.add(t.text());
                        yield new Name(t.at(), t.text());
                    }
                };
            }
            case STRING -> {
                // adjacent literals concatenate, as in Python
                StringBuilder b = new StringBuilder();
                while (cur().kind() == Kind.STRING) b.append(next().text());
                return new Const(t.at(), b.toString());
            }
            case INT, FLOAT -> {
                next();
                return new Const(t.at(), t.value());
            }
            default -> { }
        }
        if (t.isOp("(")) {
            next();
            Expr e = parseTuple(true, List.of(), true);
            expectOp(")");
            return e;
        }
        if (t.isOp("[")) return list();
        if (t.isOp("{")) return dict();
        throw fail(t, "unexpected '" + describe(t) + "'");
    }

    private Expr list() {
        int at = next().at();
        List<Expr> items = new ArrayList<>();
        while (!cur().isOp("]")) {
            if (!items.isEmpty()) expectOp(",");
            if (cur().isOp("]")) break;
            items.add(expression(true));
        }
        expectOp("]");
        return new ListLit(at, items);
    }

    private Expr dict() {
        int at = next().at();
        List<Expr> keys = new ArrayList<>();
        List<Expr> values = new ArrayList<>();
        while (!cur().isOp("}")) {
            if (!keys.isEmpty()) expectOp(",");
            if (cur().isOp("}")) break;
            keys.add(expression(true));
            expectOp(":");
            values.add(expression(true));
        }
        expectOp("}");
        return new DictLit(at, keys, values);
    }

    private Expr postfix(Expr node) {
        while (true) {
            Token t = cur();
            if (t.isOp(".") || t.isOp("[")) {
                node = subscript(node);
            } else if (t.isOp("(")) {
                node = call(node);
            } else {
                return node;
            }
        }
    }

    private Expr filterExpr(Expr node) {
        while (true) {
            Token t = cur();
            if (t.isOp("|")) {
                node = filterChain(node, false);
            } else if (t.isName("is")) {
                node = test(node);
            } else if (t.isOp("(")) {
                node = call(node);
            } else {
                return node;
            }
        }
    }

    private Expr subscript(Expr node) {
        Token t = next();
        if (t.isOp(".")) {
            Token attr = next();
            if (attr.kind() == Kind.NAME) return new GetAttr(attr.at(), node, attr.text());
            if (attr.kind() == Kind.INT) return new GetItem(attr.at(), node, new Const(attr.at(), attr.value()));
            throw fail(attr, "expected name or number after '.', got '" + describe(attr) + "'");
        }
        List<Expr> args = new ArrayList<>();
        while (!cur().isOp("]")) {
            if (!args.isEmpty()) expectOp(",");
            args.add(subscribed());
        }
        expectOp("]");
        Expr key = args.size() == 1 ? args.get(0) : new TupleLit(t.at(), args);
        return new GetItem(t.at(), node, key);
    }

    private Expr subscribed() {
        int at = cur().at();
        Expr start = null;
        if (!cur().isOp(":")) {
            start = expression(true);
            if (!cur().isOp(":")) return start;
        }
        next();
        Expr stop = cur().isOp("]") || cur().isOp(",") || cur().isOp(":") ? null : expression(true);
        Expr step = null;
        if (skipOp(":") && !(cur().isOp("]") || cur().isOp(","))) step = expression(true);
        return new Slice(at, start, stop, step);
    }

    /** A call is reported at its callee (the name or the .attr), which reads better than at '('. */
    private Call call(Expr fn) {
        return new Call(fn.at(), fn, callArgs());
    }

    private ArgList callArgs() {
        expectOp("(");
        List<Expr> positional = new ArrayList<>();
        List<String> names = new ArrayList<>();
        List<Expr> keyword = new ArrayList<>();
        boolean requireComma = false;
        while (!cur().isOp(")")) {
            if (requireComma) {
                expectOp(",");
                if (cur().isOp(")")) break;
            }
            Token t = cur();
            if (t.isOp("*") || t.isOp("**")) throw fail(t, "*args and **kwargs in calls are not supported");
            if (t.kind() == Kind.NAME && look().isOp("=")) {
                next();
                next();
                names.add(t.text());
                keyword.add(expression(true));
            } else {
                if (!names.isEmpty()) throw fail(t, "positional argument follows keyword argument");
                positional.add(expression(true));
            }
            requireComma = true;
        }
        expectOp(")");
        return new ArgList(positional, names, keyword);
    }

    private String dottedName() {
        StringBuilder name = new StringBuilder(expect(Kind.NAME, "a name").text());
        while (cur().isOp(".")) {
            next();
            name.append('.').append(expect(Kind.NAME, "a name").text());
        }
        return name.toString();
    }

    /** `| f(args) | g` applied to node; startInline: the first `|` is implied (filter blocks). */
    private Filter filterChain(Expr node, boolean startInline) {
        Filter f = null;
        while (cur().isOp("|") || startInline) {
            if (!startInline) next();
            startInline = false;
            Token t = cur();
            String name = dottedName();
            if (!Builtins.hasFilter(name)) throw fail(t, "no filter named '" + name + "'");
            ArgList args = cur().isOp("(") ? callArgs() : ArgList.NONE;
            f = new Filter(t.at(), f == null ? node : f, name, args);
        }
        return f;
    }

    private Expr test(Expr node) {
        int at = next().at();
        boolean negated = skipName("not");
        Token t = cur();
        String name = dottedName();
        if (!Builtins.hasTest(name)) throw fail(t, "no test named '" + name + "'");
        ArgList args = ArgList.NONE;
        Token c = cur();
        if (c.isOp("(")) {
            args = callArgs();
        } else if ((c.kind() == Kind.NAME || c.kind() == Kind.STRING || c.kind() == Kind.INT
                || c.kind() == Kind.FLOAT || c.isOp("[") || c.isOp("{"))
                && !(c.isName("else") || c.isName("or") || c.isName("and"))) {
            // jinja2 takes one bare argument: `x is divisibleby 3`, `x is sameas none`
            if (c.isName("is")) throw fail(c, "you cannot chain multiple tests with is");
            args = new ArgList(List.of(postfix(primary())), List.of(), List.of());
        }
        Expr test = new Test(at, node, name, args);
        return negated ? new Not(at, test) : test;
    }
}
