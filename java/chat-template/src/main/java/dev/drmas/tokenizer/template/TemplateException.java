// TemplateException.java — every failure of a chat template, at parse or render time: a syntax
// error, a runtime type error, an undefined value used where jinja2 would fail, or the template's
// own raise_exception(msg). The message always names line:col in the template source.
package dev.drmas.tokenizer.template;

public final class TemplateException extends RuntimeException {
    private final String reason;
    private final int line;
    private final int column;
    private final boolean raisedByTemplate;

    TemplateException(String reason, int line, int column, boolean raisedByTemplate) {
        super((raisedByTemplate ? "template raised: " : "") + reason + " (template line " + line + ":" + column + ")");
        this.reason = reason;
        this.line = line;
        this.column = column;
        this.raisedByTemplate = raisedByTemplate;
    }

    /** The bare message; for raise_exception(msg) it is exactly the template's msg. */
    public String reason() {
        return reason;
    }

    /** 1-based line in the template source (after jinja2's newline normalisation). */
    public int line() {
        return line;
    }

    /** 1-based column (in UTF-16 chars) of the token where the problem was found. */
    public int column() {
        return column;
    }

    /** True when the template itself called raise_exception (e.g. "roles must alternate"). */
    public boolean raisedByTemplate() {
        return raisedByTemplate;
    }
}
