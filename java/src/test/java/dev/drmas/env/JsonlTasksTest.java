// JsonlTasksTest.java — JSONL datasets on real files: configurable field names, numbers kept as
// written, blank lines, ids; and every malformed input reported with file:line and the field.
package dev.drmas.env;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

class JsonlTasksTest {
    @TempDir
    Path dir;

    Path write(String text) throws IOException {
        Path p = dir.resolve("tasks.jsonl");
        Files.writeString(p, text);
        return p;
    }

    @Test
    void aListAnswerGivesTheAnswerAndItsAliases() throws IOException {
        Path p = write("{\"question\": \"Big city?\", \"golden_answers\": [\"New York City\", \"NYC\"], \"other\": [\"x\", 1]}\n"
                + "{\"question\": \"One?\", \"golden_answers\": [\"one\"]}\n"
                + "{\"question\": \"Plain?\", \"golden_answers\": \"plain\"}\n");
        List<Task> tasks = JsonlTasks.read(p, "question", "golden_answers");
        assertEquals(List.of(new Task("1", "Big city?", "New York City", List.of("NYC")), new Task("2", "One?", "one"),
                new Task("3", "Plain?", "plain")), tasks);
        assertEquals(List.of("New York City", "NYC"), tasks.getFirst().golds());
        for (String[] bad : new String[][] {
                {"{\"question\": \"q\", \"a\": []}\n", ":1: field 'a' is an empty list"},
                {"{\"question\": \"q\", \"a\": [\"x\", null]}\n", ":1: field 'a[1]' must be a string or a finite number"},
                {"{\"question\": \"q\", \"a\": [\"x\", NaN]}\n", ":1: field 'a[1]' must be a string or a finite number"},
                {"{\"question\": \"q\", \"a\": [\" \"]}\n", ":1: field 'a[0]' is empty"}}) {
            Path f = write(bad[0]);
            TaskFileException e = assertThrows(TaskFileException.class, () -> JsonlTasks.read(f, "question", "a"));
            assertTrue(e.getMessage().contains(bad[1]), e.getMessage());
        }
    }

    @Test
    void realFilesQuirks() throws IOException {
        // Python's json.dumps writes NaN for a pandas gap; Notepad a byte order mark; chat-format prompts are lists;
        // an answer list may hold a number beside its string
        Path p = write("\uFEFF{\"prompt\": [{\"role\": \"user\", \"content\": \"Two?\"}], \"level\": NaN, \"a\": [\"2\", 2.0]}\n"
                + "{\"prompt\": [{\"role\": \"system\", \"content\": \"s\"}, {\"role\": \"user\", \"content\": \"Three?\"}], "
                + "\"level\": -Infinity, \"a\": 3}\n");
        assertEquals(List.of(new Task("1", "Two?", "2", List.of("2.0")), new Task("2", "s", "3")),
                JsonlTasks.read(p, "prompt.0.content", "a"));
        Path second = write(Files.readAllLines(p).get(1));
        assertEquals("Three?", JsonlTasks.read(second, "prompt.1.content", "a").getFirst().question());
        for (String[] bad : new String[][] {
                {"{\"question\": \"q\", \"a\": NaN}\n", "question", ":1: field 'a' is NaN, not a string or a finite number"},
                {"{\"question\": \"q\", \"a\": \"x\", \"id\": Infinity}\n", "question", ":1: field 'id' must be a string or an integer"},
                {"{\"prompt\": [{\"content\": \"q\"}], \"a\": \"x\"}\n", "prompt.content",
                    ":1: field 'prompt.content' is missing: 'prompt' is a list, whose elements a path names by number ('prompt.0.content' for its first)"},
                {"{\"prompt\": [{\"content\": \"q\"}], \"a\": \"x\"}\n", "prompt.1.content", ":1: field 'prompt.1.content' is missing"},
                {"{\"prompt\": [{\"content\": \"q\"}], \"a\": \"x\"}\n", "prompt.", ":1: field 'prompt.' is missing"}}) {
            Path f = write(bad[0]);
            TaskFileException e = assertThrows(TaskFileException.class, () -> JsonlTasks.read(f, bad[1], "a"));
            assertTrue(e.getMessage().contains(bad[2]), e.getMessage());
        }
    }

    @Test
    void readsConfiguredFieldsAndKeepsNumbersAsWritten() throws IOException {
        Path p = write("""
                {"problem": "What is 1/2 as a decimal?", "solution": "0.5", "source": {"x": [1, 2]}}

                {"problem": "Half of 1?", "solution": 0.50}
                   \t
                {"solution": -7, "problem": "What is 3-10?", "id": "q-7"}
                {"problem": "Big?", "solution": 1e3, "id": 12}
                {"problem": "Exact?", "solution": 12345678901234567890123}
                """);
        List<Task> tasks = JsonlTasks.read(p, "problem", "solution");
        assertEquals(List.of(
                new Task("1", "What is 1/2 as a decimal?", "0.5"),
                new Task("3", "Half of 1?", "0.50"),
                new Task("q-7", "What is 3-10?", "-7"),
                new Task("12", "Big?", "1e3"),
                new Task("7", "Exact?", "12345678901234567890123")), tasks);
    }

    @Test
    void defaultFieldNamesAreQuestionAndAnswer() throws IOException {
        Path p = write("{\"question\": \"What is 2+2?\", \"answer\": \"4\"}");
        assertEquals(List.of(new Task("1", "What is 2+2?", "4")), JsonlTasks.read(p));
    }

    @ParameterizedTest
    @CsvSource(delimiter = '|', quoteCharacter = '`', value = {
        "{\"q\": \"a\", \"a\": \"1\"}\\n{\"q\": \"b\", \"a\": 2 | 2: not valid JSON",
        "[1, 2]                                  | 1: expected a JSON object, got an array",
        "\"just text\"                           | 1: expected a JSON object, got a string",
        "{\"q\": \"a\", \"a\": \"1\"} {}         | 1: unexpected text after the JSON object",
        "{\"a\": \"1\"}                          | 1: field 'q' is missing",
        "{\"q\": \"a\"}                          | 1: field 'a' is missing",
        "{\"q\": 5, \"a\": \"1\"}                | 1: field 'q' must be a string, got a number",
        "{\"q\": [\"a\"], \"a\": \"1\"}          | 1: field 'q' must be a string, got an array",
        "{\"q\": \"a\", \"a\": true}             | 1: field 'a' must be a string or a number, got a boolean",
        "{\"q\": \"a\", \"a\": null}             | 1: field 'a' must be a string or a number, got null",
        "{\"q\": \"a\", \"a\": {\"v\": 1}}       | 1: field 'a' must be a string or a number, got an object",
        "{\"q\": \"  \", \"a\": \"1\"}           | 1: field 'q' is empty",
        "{\"q\": \"a\", \"a\": \"\"}             | 1: field 'a' is empty",
        "{\"q\": \"a\", \"a\": \"1\", \"id\": 1.5} | 1: field 'id' must be a string or an integer, got 1.5",
        "{\"q\": \"a\", \"a\": \"1\", \"id\": 1e41} | 1: field 'id' must be a string or an integer, got 1e41",
        "{\"q\": \"a\", \"a\": \"1\", \"id\": \" \"} | 1: field 'id' is empty",
        "{\"q\": \"a\", \"a\": \"1\", \"id\": \"\"}  | 1: field 'id' is empty",
        "\\n{\"q\": \"a\", \"a\": \"1\", \"id\": \"x\"}\\n{\"q\": \"b\", \"a\": \"2\", \"id\": \"x\"} | 3: id 'x' was already used on line 2 (a file of several benchmarks, each numbering its own ids, needs data.data_source_field: it scopes them)",
        "{\"q\": \"a\", \"a\": \"1\", \"id\": 2}\\n{\"q\": \"b\", \"a\": \"2\"} | 2: line 2 has no id and is named by its line number, '2', which is also line 1's id: give every line an id, or none",
        "{\"q\": \"a\", \"a\": \"1\"}\\n{\"q\": \"b\", \"a\": \"2\", \"id\": 1} | 2: line 1 has no id and is named by its line number, '1', which is also line 2's id: give every line an id, or none",
    })
    void badLinesNameFileLineAndField(String text, String expected) throws IOException {
        Path p = write(text.replace("\\n", "\n"));
        TaskFileException e = assertThrows(TaskFileException.class, () -> JsonlTasks.read(p, "q", "a"));
        // the parser's problem, in parentheses, follows "not valid JSON"; every other message is ours in full
        if (expected.endsWith("not valid JSON")) {
            assertTrue(e.getMessage().startsWith(p + ":" + expected + " ("), e.getMessage());
        } else {
            assertEquals(p + ":" + expected, e.getMessage());
        }
    }

    /** A line cut short says so in drmas's words: the parser's own text named a "Source: REDACTED" and its settings. */
    @Test
    void aTruncatedLineIsNamedWithoutTheParsersInternals() throws IOException {
        Path p = write("{\"q\": \"a\", \"a\": \"1\"}\n{\"q\": \"b\", \"a\": \"2\"\n");
        TaskFileException e = assertThrows(TaskFileException.class, () -> JsonlTasks.read(p, "q", "a"));
        assertEquals(p + ":2: not valid JSON (unexpected end-of-input: expected close marker for Object) at column 20", e.getMessage());
    }

    @Test
    void duplicateKeyIsAnError() throws IOException {
        Path p = write("{\"q\": \"a\", \"a\": \"1\", \"a\": \"2\"}\n");
        TaskFileException e = assertThrows(TaskFileException.class, () -> JsonlTasks.read(p, "q", "a"));
        assertEquals(p + ":1: not valid JSON (duplicate field 'a') at column 25", e.getMessage());
    }

    @Test
    void emptyOrMissingFileIsAnError() throws IOException {
        Path empty = write("");
        assertEquals(empty + ": no tasks (the file is empty)",
                assertThrows(TaskFileException.class, () -> JsonlTasks.read(empty)).getMessage());
        Path blank = write("\n  \n\n");
        assertEquals(blank + ": no tasks (the file is empty)",
                assertThrows(TaskFileException.class, () -> JsonlTasks.read(blank)).getMessage());
        Path missing = dir.resolve("nope.jsonl");
        assertEquals(missing + ": no such file", assertThrows(TaskFileException.class, () -> JsonlTasks.read(missing)).getMessage());
    }

    @Test
    void notUtf8IsAnError() throws IOException {
        Path p = dir.resolve("latin1.jsonl");
        Files.write(p, new byte[] {'{', '"', 'q', '"', ':', '"', (byte) 0xE9, '"', '}', '\n'});
        assertEquals(p + ":1: not UTF-8 text (byte 0xe9)", assertThrows(TaskFileException.class, () -> JsonlTasks.read(p)).getMessage());
        // past the reader's look-ahead: the line is the bad byte's, not the last one handed out
        StringBuilder good = new StringBuilder();
        for (int i = 0; i < 3000; i++) good.append("{\"q\": \"question ").append(i).append(" é\", \"a\": \"1\"}\n");
        byte[] head = good.toString().getBytes(java.nio.charset.StandardCharsets.UTF_8);
        byte[] all = java.util.Arrays.copyOf(head, head.length + 12);
        System.arraycopy(new byte[] {'{', '"', 'q', '"', ':', '"', (byte) 0xFF, '"', '}', '\n', 'x', '\n'}, 0, all, head.length, 12);
        Files.write(p, all);
        assertEquals(p + ":3001: not UTF-8 text (byte 0xff)", assertThrows(TaskFileException.class, () -> JsonlTasks.read(p, "q", "a")).getMessage());
    }
    @Test
    void theBenchmarkFieldOnEveryLineOrNone() throws IOException {
        Path p = write("{\"question\": \"q1\", \"answer\": 1, \"data_source\": \"aime24\"}\n"
                + "{\"question\": \"q2\", \"answer\": 2, \"data_source\": \"math500\"}\n");
        List<Task> t = JsonlTasks.read(p, "question", "answer", "data_source");
        assertEquals(List.of("aime24", "math500"), t.stream().map(Task::dataSource).toList());
        assertEquals(null, JsonlTasks.read(p, "question", "answer").getFirst().dataSource(), "no field asked for: none read");
        assertEquals(null, JsonlTasks.read(write("{\"question\": \"q\", \"answer\": 1}\n"), "question", "answer", "data_source")
                .getFirst().dataSource(), "a file without the field has none");

        Path nulls = write("{\"question\": \"q1\", \"answer\": 1, \"data_source\": null}\n{\"question\": \"q2\", \"answer\": 2}\n");
        assertEquals(java.util.Arrays.asList(null, null),
                JsonlTasks.read(nulls, "question", "answer", "data_source").stream().map(Task::dataSource).toList(), "null is no benchmark");
        Path missing = write("{\"question\": \"q1\", \"answer\": 1, \"data_source\": \"a\"}\n{\"question\": \"q2\", \"answer\": 2}\n");
        assertEquals(missing + ":2: field 'data_source' is missing, though earlier lines have it: the benchmark of every task or of none",
                assertThrows(TaskFileException.class, () -> JsonlTasks.read(missing, "question", "answer", "data_source")).getMessage());
        Path late = write("{\"question\": \"q1\", \"answer\": 1}\n\n{\"question\": \"q2\", \"answer\": 2, \"data_source\": \"a\"}\n");
        assertEquals(late + ":3: field 'data_source' is here but on no earlier line: the benchmark of every task or of none",
                assertThrows(TaskFileException.class, () -> JsonlTasks.read(late, "question", "answer", "data_source")).getMessage());
        Path number = write("{\"question\": \"q1\", \"answer\": 1, \"data_source\": 7}\n");
        assertEquals(number + ":1: field 'data_source' must be a string, got a number",
                assertThrows(TaskFileException.class, () -> JsonlTasks.read(number, "question", "answer", "data_source")).getMessage());
        Path blank = write("{\"question\": \"q1\", \"answer\": 1, \"data_source\": \" \"}\n");
        assertEquals(blank + ":1: field 'data_source' is empty",
                assertThrows(TaskFileException.class, () -> JsonlTasks.read(blank, "question", "answer", "data_source")).getMessage());
    }
    @Test
    void idsAreScopedByTheirBenchmarkAndPandasGapsAreNoId() throws IOException {
        // Search-R1's test file concatenates seven FlashRAG sets, each with its own "test_0", ...; the reference's math
        // test file has AIME24's integer ids and none (null, or 60.0 beside them once pandas made the column float)
        Path p = write("""
                {"question": "q1", "golden_answers": ["a"], "id": "test_0", "data_source": "nq"}
                {"question": "q2", "golden_answers": ["b"], "id": "test_0", "data_source": "triviaqa"}
                {"question": "q3", "golden_answers": ["c"], "id": "test_1", "data_source": "nq"}
                {"question": "q4", "golden_answers": ["d"], "id": null, "data_source": "aime24"}
                {"question": "q5", "golden_answers": ["e"], "id": 60.0, "data_source": "aime24"}
                {"question": "q6", "golden_answers": ["f"], "id": 6.1e1, "data_source": "aime24"}
                """);
        for (boolean benchmarks : new boolean[] {true, false}) {  // the test file, and the training file (no benchmarks)
            List<Task> t = JsonlTasks.read(p, "question", "golden_answers", "data_source", benchmarks);
            assertEquals(List.of("nq/test_0", "triviaqa/test_0", "nq/test_1", "4", "aime24/60", "aime24/61"),
                    t.stream().map(Task::id).toList(), "benchmarks " + benchmarks);
            assertEquals("triviaqa", t.get(1).dataSource());  // the training file's too: the grader is given it
        }
        // within a benchmark an id is still unique; without the field (data_source_field: null) the file's ids are
        Path twice = write("""
                {"question": "q1", "golden_answers": ["a"], "id": "test_0", "data_source": "nq"}
                {"question": "q2", "golden_answers": ["b"], "id": "test_0", "data_source": "nq"}
                """);
        assertEquals(twice + ":2: id 'nq/test_0' was already used on line 1",
                assertThrows(TaskFileException.class, () -> JsonlTasks.read(twice, "question", "golden_answers", "data_source", false))
                        .getMessage());
        assertEquals(p + ":2: id 'test_0' was already used on line 1 (a file of several benchmarks, each numbering its own ids, needs data.data_source_field: it scopes them)",
                assertThrows(TaskFileException.class, () -> JsonlTasks.read(p, "question", "golden_answers", null, false)).getMessage());
        // the training file's benchmark field is only read for the ids: on some lines, or not a string, it is no error
        Path mixed = write("""
                {"question": "q1", "golden_answers": ["a"], "id": "train_0", "data_source": "nq"}
                {"question": "q2", "golden_answers": ["b"], "id": "train_0"}
                {"question": "q3", "golden_answers": ["c"], "id": "train_1", "data_source": 7}
                """);
        List<Task> training = JsonlTasks.read(mixed, "question", "golden_answers", "data_source", false);
        assertEquals(List.of("nq/train_0", "train_0", "train_1"), training.stream().map(Task::id).toList());
        assertEquals(java.util.Arrays.asList("nq", null, null), training.stream().map(Task::dataSource).toList());
    }

    @Test
    void dottedFieldsReachIntoNestedObjectsAsVerlsDataFilesKeepThem() throws IOException {
        // a row of the Dr. MAS reference's math data (examples/data_preprocess/drmas_math.py) as pandas'
        // to_json(orient="records", lines=True) writes its parquet file
        Path p = write("{\"data_source\":\"aime24\",\"ability\":\"math\",\"reward_model\":{\"style\":\"rule\",\"ground_truth\":\"204\"},"
                + "\"prompt\":[{\"role\":\"user\",\"content\":\"Every morning Aya ...\"}],"
                + "\"extra_info\":{\"split\":\"test\",\"index\":0,\"answer\":\"204\",\"question\":\"Every morning Aya ...\"}}\n"
                // Search-R1's shape: the accepted answers as a list under reward_model.ground_truth.target
                + "{\"data_source\":\"nq\",\"question\":\"who wrote x?\",\"reward_model\":{\"ground_truth\":{\"target\":[\"Ann Lee\",\"A. Lee\"]}},"
                + "\"extra_info\":{\"question\":\"who wrote x?\",\"answer\":\"Ann Lee\"}}\n");
        List<Task> t = JsonlTasks.read(p, "extra_info.question", "extra_info.answer", "data_source");
        assertEquals(List.of("Every morning Aya ...", "who wrote x?"), t.stream().map(Task::question).toList());
        assertEquals(List.of("204", "Ann Lee"), t.stream().map(Task::answer).toList());
        assertEquals(List.of("aime24", "nq"), t.stream().map(Task::dataSource).toList());
        Path q = write("{\"question\":\"who wrote x?\",\"reward_model\":{\"ground_truth\":{\"target\":[\"Ann Lee\",\"A. Lee\"]}}}\n");
        Task s = JsonlTasks.read(q, "question", "reward_model.ground_truth.target").getFirst();
        assertEquals(List.of("Ann Lee", "A. Lee"), s.golds());

        Path missing = write("{\"extra_info\":{\"answer\":\"1\"}}\n");
        assertEquals(missing + ":1: field 'extra_info.question' is missing",
                assertThrows(TaskFileException.class, () -> JsonlTasks.read(missing, "extra_info.question", "extra_info.answer")).getMessage());
        Path object = write("{\"extra_info\":{\"question\":\"q\"},\"answer\":1}\n");
        assertEquals(object + ":1: field 'extra_info' must be a string, got an object",
                assertThrows(TaskFileException.class, () -> JsonlTasks.read(object, "extra_info", "answer")).getMessage());
        Path dup = write("{\"extra_info\":{\"question\":\"q\",\"question\":\"r\"},\"answer\":1}\n");
        assertTrue(assertThrows(TaskFileException.class, () -> JsonlTasks.read(dup, "extra_info.question", "answer")).getMessage()
                .startsWith(dup + ":1: not valid JSON (duplicate field 'question')"));
    }
}
