// JsonProblem.java — what a JSON parser found wrong in a file the user gave (config.json, a
// safetensors header or index, a tokenizer's files), in drmas's words: the parser's own message
// without its class and setting names or its "Source: REDACTED", and where in the file it is.
// Shared so that every reader of a user's JSON says it the same way.
package dev.drmas.model;

import com.fasterxml.jackson.core.JsonLocation;
import com.fasterxml.jackson.core.JsonProcessingException;

public final class JsonProblem {
    private JsonProblem() {
    }

    /**
     * What the JSON parser found wrong, in its words but without its internals: no location (the
     * caller gives it, {@link #at}), no "[Source: ...]", no class or setting names; shortened.
     */
    public static String describe(JsonProcessingException e) {
        String m = e.getOriginalMessage() == null ? "" : e.getOriginalMessage().lines().findFirst().orElse("");
        int cut = m.indexOf(" (start marker at");  // "expected close marker for Object (start marker at [Source: ...])"
        if (cut >= 0) m = m.substring(0, cut);
        m = m.replaceAll(", from `[^`]*`", "");  // a parser limit: "... the maximum allowed (1000, from `StreamReadConstraints...`)"
        if (m.isBlank() || m.contains("`") || m.contains("Source:")) return "malformed";
        if (m.length() > 160) m = m.substring(0, 157) + "...";
        return Character.toLowerCase(m.charAt(0)) + m.substring(1);
    }

    /** " at line L, column C" of a text file (1-based, as editors count), or "" where the parser did not say. */
    public static String at(JsonLocation loc) {
        if (loc == null || loc.getLineNr() <= 0) return "";
        return " at line " + loc.getLineNr() + (loc.getColumnNr() > 0 ? ", column " + loc.getColumnNr() : "");
    }

    /** " at column C" of a one-line text (a JSONL line, whose number the caller gives), or "" where unknown. */
    public static String atColumn(JsonLocation loc) {
        return loc == null || loc.getColumnNr() <= 0 ? "" : " at column " + loc.getColumnNr();
    }
}
