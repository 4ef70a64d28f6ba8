// CorpusFile.java — a passage corpus as JSONL: one object per line with "id" (string or integer),
// "title" and "text"; Search-R1's wiki dumps ({"id", "contents": "\"Title\"\ntext"}) read as well,
// the title being the first line of contents. Streamed, because real corpora hold millions of
// passages; a bad line stops with file:line and the field. Documents that come from elsewhere (a
// retrieval server's answer, the stored JSON of a Pyserini index) are read leniently (document).
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

    // as strict as the task files' reader (JsonlTasks): a key given twice or text after the object is an error
    // naming the line, not a passage that silently keeps the last value or drops the rest of its line
    private static final ObjectMapper JSON = com.fasterxml.jackson.databind.json.JsonMapper.builder()
            .enable(com.fasterxml.jackson.core.StreamReadFeature.STRICT_DUPLICATE_DETECTION)
            .enable(com.fasterxml.jackson.core.json.JsonReadFeature.ALLOW_NON_NUMERIC_NUMBERS)  // (NaN in a field not read: as JsonlTasks)
            .enable(com.fasterxml.jackson.databind.DeserializationFeature.FAIL_ON_TRAILING_TOKENS).build();

    /** Every passage of {@code file}, in file order. */
    public static List<Passage> read(Path file) {
        List<Passage> out = new ArrayList<>();
        forEach(file, out::add);
        return out;
    }

    /**
     * Hands each passage of {@code file} to {@code sink} in file order; blank lines are skipped.
     * Ids must be unique (a duplicate would make two documents answer to one id); the check keeps a
     * 64-bit hash of each id (PassageIds), not the ids, and reads the file again to settle a repeated
     * hash; a file that is not a regular one (a pipe) keeps its ids.
     *
     * @return the number of passages
     * @throws TaskFileException naming file:line and the field, also for a file without passages
     */
    public static long forEach(Path file, Consumer<Passage> sink) {
        return forEach(file, sink, new PassageIds());
    }

    static long forEach(Path file, Consumer<Passage> sink, PassageIds ids) {
        long[] count = {0};
        // a pipe (drmas index <(zcat wiki.jsonl.gz) ...) cannot be read again: its ids are kept whole, as before
        Map<String, Integer> exact = Files.isRegularFile(file) ? null : new HashMap<>();
        JsonlLines.forEach(file, (line, lineNo, where) -> {
            Passage p = parse(line, where);
            int first = 0;  // the line that used the id before, if one did
            if (exact != null) first = exact.getOrDefault(p.id(), 0);
            else if (!ids.add(p.id())) first = lineOf(file, p.id(), lineNo);  // 0: another id with the same hash
            if (first > 0) throw new TaskFileException(where + ": id '" + p.id() + "' was already used on line " + first);
            if (exact != null) exact.put(p.id(), lineNo);
            sink.accept(p);
            count[0]++;
        });
        if (count[0] == 0) throw new TaskFileException(file + ": no passages (the file is empty)");
        return count[0];
    }

    // ends the re-reading of lineOf early
    private static final class Found extends RuntimeException {
        Found() {
            super(null, null, false, false);
        }
    }

    /**
     * The first line before {@code before} whose passage has id {@code id}, or 0 when none has: the
     * ids' table keeps hashes, so a repeated hash is confirmed by reading the file again (once a
     * corpus, on a duplicate, which ends the read, or on two ids that share a 64-bit hash).
     */
    private static int lineOf(Path file, String id, int before) {
        int[] line = {0};
        try {
            JsonlLines.forEach(file, (text, lineNo, where) -> {
                if (lineNo >= before) throw new Found();
                if (parse(text, where).id().equals(id)) {
                    line[0] = lineNo;
                    throw new Found();
                }
            });
        } catch (Found stop) {
            // line[0] is the answer
        }
        return line[0];
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
        if (node.has("contents")) return fromContents(id.asText(), string(node, "contents", where));
        throw new TaskFileException(where + ": field 'text' is missing (a passage needs \"text\", or Search-R1's \"contents\")");
    }

    // Search-R1's form: the title on the first line (in double quotes), the text after it
    private static Passage fromContents(String id, String contents) {
        int nl = contents.indexOf('\n');
        String title = nl < 0 ? "" : stripQuotes(contents.substring(0, nl).strip());
        return new Passage(id, title, nl < 0 ? contents : contents.substring(nl + 1).strip());
    }

    /**
     * A document that drmas did not write, read leniently: a retrieval server's answer (Search-R1's
     * and the Dr. MAS reference's BM25 server send {"title", "text", "contents"} without an id, their
     * dense server the corpus rows {"id", "contents"}) or the stored JSON of a Pyserini index. The id
     * is "id" when it is a string or a number, else {@code fallbackId}, else a hash of the document's
     * title and text (stable: the same document has the same id in every answer); "title" and "text"
     * when "text" is a string, else "contents" split as Search-R1's passages are (the first line the
     * title, its double quotes removed); an empty text is kept (a title-only page).
     *
     * @throws IllegalArgumentException for a document with neither a string "text" nor "contents"
     */
    static Passage document(JsonNode node, String fallbackId, String where) {
        if (node == null || !node.isObject()) throw new IllegalArgumentException(where + " is not a document object");
        JsonNode text = node.get("text"), contents = node.get("contents"), title = node.get("title");
        Passage p;
        if (text != null && text.isTextual()) {
            p = new Passage("", title != null && title.isTextual() ? title.asText() : "", text.asText());
        } else if (contents != null && contents.isTextual()) {
            p = fromContents("", contents.asText());
        } else {
            List<String> has = new ArrayList<>();
            node.fieldNames().forEachRemaining(has::add);
            throw new IllegalArgumentException(where + ": a document needs a string \"contents\" or \"text\"; it has "
                    + (has.isEmpty() ? "no fields" : String.join(", ", has)));
        }
        JsonNode id = node.get("id");
        String given = id != null && (id.isTextual() || id.isNumber()) && !id.asText().isBlank() ? id.asText() : fallbackId;
        return new Passage(given != null && !given.isBlank() ? given : hashId(p), p.title(), p.text());
    }

    private static String hashId(Passage p) {
        try {
            byte[] h = java.security.MessageDigest.getInstance("SHA-256")
                    .digest((p.title() + "\n" + p.text()).getBytes(java.nio.charset.StandardCharsets.UTF_8));
            return "sha256:" + java.util.HexFormat.of().formatHex(h, 0, 8);
        } catch (java.security.NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);  // every JDK has SHA-256
        }
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
