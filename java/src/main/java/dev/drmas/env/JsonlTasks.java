// JsonlTasks.java — a dataset as a JSONL file: one JSON object per line with a question and an
// answer under configurable field names (datasets name them "problem"/"solution", "question"/
// "answer", ...; a dotted name is a path into nested objects: "extra_info.question"). The whole
// file is read and checked before training starts, so that a bad line stops the run at once with
// file:line and the field, not halfway through an epoch.
package dev.drmas.env;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.json.JsonReadFeature;
import com.fasterxml.jackson.core.StreamReadFeature;
import dev.drmas.model.JsonProblem;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

public final class JsonlTasks {
    private JsonlTasks() {
    }

    /** The optional field that names a task; without it a task is named by its line number. */
    public static final String ID_FIELD = "id";

    // A duplicated key on a line is an error rather than "last one wins": it is almost always a
    // broken export, and silently picking one answer would train on the wrong label. NaN and
    // Infinity are read (Python's json.dumps writes them for a pandas gap, in fields drmas need not
    // read): where drmas reads a number, one of them is an error naming the field.
    private static final JsonFactory JSON = JsonFactory.builder()
            .enable(StreamReadFeature.STRICT_DUPLICATE_DETECTION).enable(JsonReadFeature.ALLOW_NON_NUMERIC_NUMBERS).build();

    /** Reads {@code file} with the fields "question" and "answer". */
    public static List<Task> read(Path file) {
        return read(file, "question", "answer");
    }

    /** The tasks of {@code file} without a benchmark field ({@link #read(Path, String, String, String)}). */
    public static List<Task> read(Path file, String questionField, String answerField) {
        return read(file, questionField, answerField, null);
    }

    /** The tasks of {@code file} with their benchmarks ({@code dataSourceField}, null for none): {@link #read(Path, String, String, String, boolean)}. */
    public static List<Task> read(Path file, String questionField, String answerField, String dataSourceField) {
        return read(file, questionField, answerField, dataSourceField, dataSourceField != null);
    }

    /**
     * The tasks of {@code file}, in file order. Blank lines are skipped. The question must be a
     * non-empty string; the answer a non-empty string or a number, a number kept exactly as written
     * ("0.50" stays "0.50"), or a non-empty list of non-empty strings or finite numbers (every
     * accepted answer: the first is the task's answer, the rest its aliases); NaN or Infinity in
     * a field that is read is an error naming it, elsewhere on the line nothing; the id, when
     * present and not null, a non-blank string or an integer (an integral float such as pandas' 60.0 for a column with
     * gaps counts as the integer); without one a task is named by its line number. With {@code
     * benchmarks} the line's {@code dataSourceField} is its benchmark, a non-blank string on every
     * line or on none (JSON null counts as none); without, a line's non-blank string there is still
     * its task's data source (what a grader is given), other values none. Either way a line whose {@code dataSourceField} is a
     * non-blank string has its id scoped by it ("nq/test_0"): the ids must be unique within a
     * benchmark, as files that concatenate benchmarks (Search-R1's NQ + HotpotQA, its seven test
     * sets) repeat their own ids.
     *
     * @throws TaskFileException naming file:line and the field for every problem, and for a file
     *     that has no task at all
     */
    public static List<Task> read(Path file, String questionField, String answerField, String dataSourceField, boolean benchmarks) {
        List<Task> tasks = new ArrayList<>();
        Map<String, Integer> idLines = new HashMap<>();
        JsonlLines.forEach(file, (line, lineNo, where) -> {
            Map<String, Field> fields = dataSourceField == null ? parseLine(line, where, questionField, answerField)
                    : parseLine(line, where, questionField, answerField, dataSourceField);
            String question = text(fields, questionField, where, false);
            List<String> answers = answers(fields, answerField, where);
            String id = id(fields.get(ID_FIELD), where);
            // the line's source where it names one (a non-blank string): it scopes the id, and a training task's goes to
            // the grader (verl's reward functions branch on it)
            Field named = dataSourceField == null ? null : fields.get(dataSourceField);
            String namedSource = named != null && named.token == JsonToken.VALUE_STRING && !named.text.isBlank() ? named.text : null;
            if (id != null && namedSource != null) id = namedSource + "/" + id;
            boolean byLine = id == null;
            if (byLine) id = Integer.toString(lineNo);
            // (a line named by its number is kept as -line: an id elsewhere may be that number too)
            Integer seen = idLines.putIfAbsent(id, byLine ? -lineNo : lineNo);
            if (seen != null) {
                boolean firstByLine = seen < 0;
                int first = Math.abs(seen);
                if (byLine || firstByLine) {
                    int withId = byLine ? first : lineNo, numbered = byLine ? lineNo : first;
                    throw new TaskFileException(where + ": line " + numbered + " has no id and is named by its line number, '" + id
                            + "', which is also line " + withId + "'s id: give every line an id, or none");
                }
                throw new TaskFileException(where + ": id '" + id + "' was already used on line " + first + (dataSourceField == null
                        ? " (a file of several benchmarks, each numbering its own ids, needs data.data_source_field: it scopes them)" : ""));
            }
            String source = namedSource;  // the every-line-or-none rule is the benchmarks' (the test file's metrics) alone
            if (benchmarks && dataSourceField != null) {
                boolean has = named != null && named.token != JsonToken.VALUE_NULL;  // pandas writes None as null
                if (!tasks.isEmpty() && has != (tasks.getFirst().dataSource() != null)) {
                    throw new TaskFileException(where + ": field '" + dataSourceField + "' is " + (has ? "here but on no earlier line"
                            : "missing, though earlier lines have it") + ": the benchmark of every task or of none");
                }
                source = has ? text(fields, dataSourceField, where, false) : null;
            }
            tasks.add(new Task(id, question, answers.getFirst(), answers.subList(1, answers.size()), source));
        });
        if (tasks.isEmpty()) throw new TaskFileException(file + ": no tasks (the file is empty)");
        return tasks;
    }

    // One top-level value: its token and, for a scalar, its text exactly as written; for an array
    // of the answer field, its string and finite number elements as written (null for any other element).
    private record Field(JsonToken token, String text, List<String> items) {}

    // Streams the object instead of building a tree so that a number's text is the text of the file
    // (a tree would turn 1.50 into a double or a BigDecimal and print it back its own way). A wanted
    // name with dots ("extra_info.question") is also a path into nested objects, as verl's data files
    // (pandas' to_json of its parquet files) keep the question and the answer.
    private static Map<String, Field> parseLine(String line, String where, String... wanted) {
        Map<String, Field> fields = new HashMap<>();
        try (JsonParser p = JSON.createParser(line)) {
            JsonToken t = p.nextToken();
            if (t != JsonToken.START_OBJECT) {
                throw new TaskFileException(where + ": expected a JSON object, got " + describe(t));
            }
            readObject(p, "", wanted, fields);
            if (p.nextToken() != null) throw new TaskFileException(where + ": unexpected text after the JSON object");
        } catch (JsonProcessingException e) {
            throw new TaskFileException(where + ": not valid JSON (" + JsonProblem.describe(e) + ")" + JsonProblem.atColumn(e.getLocation()));
        } catch (IOException e) {  // a parser over a String has no I/O of its own to fail
            throw new TaskFileException(where + ": cannot read: " + e.getMessage(), e);
        }
        return fields;
    }

    // The members of the object the parser is in (after its START_OBJECT) under their paths: every
    // top-level one, and the nested ones a wanted path leads to.
    private static void readObject(JsonParser p, String prefix, String[] wanted, Map<String, Field> fields) throws IOException {
        while (p.nextToken() == JsonToken.FIELD_NAME) {
            String key = prefix + p.currentName();
            member(p, key, p.nextToken(), prefix.isEmpty(), wanted, fields);
        }
    }

    // The elements of the array the parser is in (after its START_ARRAY), a path's number naming
    // one: "prompt.0.content" is the content of the first message of a chat-format prompt.
    private static void readArray(JsonParser p, String prefix, String[] wanted, Map<String, Field> fields) throws IOException {
        JsonToken v;
        for (int i = 0; (v = p.nextToken()) != JsonToken.END_ARRAY; i++) member(p, prefix + i, v, false, wanted, fields);
    }

    // One value v at path key: kept when wanted (or the id, or any top-level member, for the
    // messages), descended into when a wanted path goes through it, else skipped.
    private static void member(JsonParser p, String key, JsonToken v, boolean top, String[] wanted, Map<String, Field> fields)
            throws IOException {
        boolean keep = key.equals(ID_FIELD) && top, deeper = false;
        for (String w : wanted) {
            keep |= key.equals(w);
            deeper |= w.startsWith(key + ".");
        }
        if (deeper && !keep && (v == JsonToken.START_OBJECT || v == JsonToken.START_ARRAY)) {
            if (top) fields.putIfAbsent(key, new Field(v, null, null));  // (what a wanted path that misses went through)
            if (v == JsonToken.START_OBJECT) readObject(p, key + ".", wanted, fields);
            else readArray(p, key + ".", wanted, fields);
            return;
        }
        List<String> items = null;
        if (keep && v == JsonToken.START_ARRAY) {
            items = new ArrayList<>();
            JsonToken e;
            while ((e = p.nextToken()) != JsonToken.END_ARRAY) {
                // a string, or a number as written (a list of accepted answers may hold 1961 beside "1961")
                items.add(e == JsonToken.VALUE_STRING || e.isNumeric() && !nonNumeric(p.getText()) ? p.getText() : null);
                p.skipChildren();
            }
        }
        if (keep || top) fields.putIfAbsent(key, new Field(v, keep && v.isScalarValue() ? p.getText() : null, items));
        if (items == null) p.skipChildren();
    }

    // NaN, Infinity, -Infinity: a JSON number ends with a digit
    private static boolean nonNumeric(String numberText) {
        return !numberText.isEmpty() && !Character.isDigit(numberText.charAt(numberText.length() - 1));
    }

    // A wanted path that is not on the line: where it went through a list without a number, say so.
    private static TaskFileException missing(Map<String, Field> fields, String field, String where) {
        int dot = field.indexOf('.');
        String head = dot < 0 ? null : field.substring(0, dot);
        Field top = head == null ? null : fields.get(head);
        if (top != null && top.token == JsonToken.START_ARRAY && dot + 1 < field.length() && !Character.isDigit(field.charAt(dot + 1))) {
            return new TaskFileException(where + ": field '" + field + "' is missing: '" + head + "' is a list, whose elements a "
                    + "path names by number ('" + head + ".0" + field.substring(dot) + "' for its first)");
        }
        return new TaskFileException(where + ": field '" + field + "' is missing");
    }

    private static String text(Map<String, Field> fields, String field, String where, boolean numberAllowed) {
        Field f = fields.get(field);
        if (f == null) throw missing(fields, field, where);
        if (f.token.isNumeric() && nonNumeric(f.text)) {
            throw new TaskFileException(where + ": field '" + field + "' is " + f.text + ", not a " + (numberAllowed ? "string or a finite number"
                    : "string"));
        }
        boolean ok = f.token == JsonToken.VALUE_STRING || numberAllowed && f.token.isNumeric();
        if (!ok) {
            throw new TaskFileException(where + ": field '" + field + "' must be a string" + (numberAllowed ? " or a number" : "")
                    + ", got " + describe(f.token));
        }
        if (f.text.isBlank()) throw new TaskFileException(where + ": field '" + field + "' is empty");
        return f.text;
    }

    // open-domain QA data (NQ, HotpotQA as Search-R1 ships them) lists every accepted answer
    private static List<String> answers(Map<String, Field> fields, String field, String where) {
        Field f = fields.get(field);
        if (f == null || f.token != JsonToken.START_ARRAY) return List.of(text(fields, field, where, true));
        if (f.items.isEmpty()) throw new TaskFileException(where + ": field '" + field + "' is an empty list");
        for (int i = 0; i < f.items.size(); i++) {
            String a = f.items.get(i);
            if (a == null) throw new TaskFileException(where + ": field '" + field + "[" + i + "]' must be a string or a finite number");
            if (a.isBlank()) throw new TaskFileException(where + ": field '" + field + "[" + i + "]' is empty");
        }
        return f.items;
    }

    // The line's own id, or null for none (absent, or null as pandas writes a missing value).
    private static String id(Field f, String where) {
        if (f == null || f.token == JsonToken.VALUE_NULL) return null;
        // a blank id names nothing in logs and evaluation reports (CorpusFile refuses one too)
        if (f.token == JsonToken.VALUE_STRING && f.text.isBlank()) throw new TaskFileException(where + ": field '" + ID_FIELD + "' is empty");
        if (f.token == JsonToken.VALUE_STRING || f.token == JsonToken.VALUE_NUMBER_INT) return f.text;
        if (f.token == JsonToken.VALUE_NUMBER_FLOAT && !nonNumeric(f.text)) {  // pandas writes an integer column with gaps as floats: 60.0
            java.math.BigDecimal v = new java.math.BigDecimal(f.text).stripTrailingZeros();
            // (at most 40 digits: 1e999999999 would be a billion of them)
            if (v.scale() <= 0 && v.precision() - v.scale() <= 40) return v.toBigIntegerExact().toString();
            throw new TaskFileException(where + ": field '" + ID_FIELD + "' must be a string or an integer, got " + f.text);
        }
        throw new TaskFileException(where + ": field '" + ID_FIELD + "' must be a string or an integer, got " + describe(f.token));
    }

    private static String describe(JsonToken t) {
        if (t == null) return "nothing";
        return switch (t) {
            case START_OBJECT -> "an object";
            case START_ARRAY -> "an array";
            case VALUE_STRING -> "a string";
            case VALUE_NUMBER_INT, VALUE_NUMBER_FLOAT -> "a number";
            case VALUE_TRUE, VALUE_FALSE -> "a boolean";
            case VALUE_NULL -> "null";
            default -> t.toString();
        };
    }
}
