// CorpusFile.java — a passage corpus as JSONL: one object per line with "id" (string or integer),
// "title" and "text"; Search-R1's wiki dumps ({"id", "contents": "\"Title\"\ntext"}) read as well,
// the title being the first line of contents. Streamed, because real corpora hold millions of
// passages; a bad line stops with file:line and the field.
package dev.drmas.workflow.search;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.drmas.env.JsonlLines;
import dev.drmas.env.TaskFileException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;

public final class CorpusFile {
    private CorpusFile() {
    }

    private static final ObjectMapper JSON = new ObjectMapper();

    /** Every passage of {@code file}, in file order. */
    public static List<Passage> read(Path file) {
        List<Passage> out = new ArrayList<>();
        forEach(file, out::add);
        return out;
    }

    /**
     * Hands each passage of {@code file} to {@code sink} in file order; blank lines are skipped.
     * Ids must be unique (a duplicate would make two documents answer to one id).
     *
     * @return the number of passages
     * @throws TaskFileException naming file:line and the field, also for a file without passages
     */
    public static long forEach(Path file, Consumer<Passage> sink) {
        Map<String, Integer> ids = new HashMap<>();
        long[] count = {0};
        JsonlLines.forEach(file, (line, lineNo, where) -> {
            Passage p = parse(line, where);
            Integer first = ids.putIfAbsent(p.id(), lineNo);
            if (first != null) throw new TaskFileException(where + ": id '" + p.id() + "' was already used on line " + first);
            sink.accept(p);
            count[0]++;
        });
        if (count[0] == 0) throw new TaskFileException(file + ": no passages (the file is empty)");
        return count[0];
    }

    static Passage parse(String line, String where) {
        JsonNode node;
        try {
            node = JSON.readTree(line);
        } catch (JsonProcessingException e) {
            throw new TaskFileException(where + ": not valid JSON (" + dev.drmas.model.JsonProblem.describe(e) + ")"
                    + dev.drmas.model.JsonProblem.atColumn(e.getLocation()));
        }
        if (node == null || !node.isObject()) throw new TaskFileException(where + ": expected a JSON object");
        JsonNode id = node.get("id");
        if (id == null) throw new TaskFileException(where + ": field 'id' is missing");
        if (!id.isTextual() && !id.isIntegralNumber()) throw new TaskFileException(where + ": field 'id' must be a string or an integer");
        if (id.asText().isBlank()) throw new TaskFileException(where + ": field 'id' is empty");
        if (node.has("text")) {
            String text = string(node, "text", where);
            String title = node.has("title") ? string(node, "title", where) : "";
            return new Passage(id.asText(), title, text);
        }
        if (node.has("contents")) {
            String contents = string(node, "contents", where);
            int nl = contents.indexOf('\n');
            String title = nl < 0 ? "" : stripQuotes(contents.substring(0, nl).strip());
            return new Passage(id.asText(), title, nl < 0 ? contents : contents.substring(nl + 1).strip());
        }
        throw new TaskFileException(where + ": field 'text' is missing (a passage needs \"text\", or Search-R1's \"contents\")");
    }

    private static String string(JsonNode node, String field, String where) {
        JsonNode v = node.get(field);
        if (!v.isTextual()) throw new TaskFileException(where + ": field '" + field + "' must be a string");
        if (field.equals("text") && v.asText().isBlank()) throw new TaskFileException(where + ": field 'text' is empty");
        return v.asText();
    }

    // Search-R1's wiki-18 writes titles in double quotes
    private static String stripQuotes(String s) {
        return s.length() >= 2 && s.startsWith("\"") && s.endsWith("\"") ? s.substring(1, s.length() - 1) : s;
    }

    /** Writes {@code passages} as JSONL (id, title, text). */
    public static void write(Path file, List<Passage> passages) {
        StringBuilder sb = new StringBuilder();
        for (Passage p : passages) {
            var o = JSON.createObjectNode();
            o.put("id", p.id());
            o.put("title", p.title());
            o.put("text", p.text());
            sb.append(o).append('\n');
        }
        try {
            if (file.getParent() != null) Files.createDirectories(file.getParent());
            Files.writeString(file, sb);
        } catch (IOException e) {
            throw new java.io.UncheckedIOException("writing " + file, e);
        }
    }
}
