// EvalPerSourceTest.java — evaluation per benchmark of a mixed test file (data.data_source_field, verl's
// data_source): the per-source avg@n and pass@k from hand-made counts, and a real run on JSONL tasks
// of two benchmarks whose metrics.jsonl has each benchmark's numbers, with the overall avg@n their
// task-weighted mean.
package dev.drmas.train;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.drmas.env.Task;
import dev.drmas.metrics.PassAtK;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.bytedeco.pytorch.global.torch;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class EvalPerSourceTest {
    @TempDir
    Path tmp;

    @BeforeAll
    static void threads() {
        torch.set_num_threads(2);
    }

    private static Task task(String id, String source) {
        return new Task(id, "q", "1", List.of(), source);
    }

    @Test
    void eachBenchmarkGetsItsOwnNumbers() {
        List<Task> tasks = List.of(task("1", "aime24"), task("2", "math500"), task("3", "aime24"));
        List<PassAtK.Counts> counts = List.of(PassAtK.Counts.of(new boolean[] {true, false, false, false}),
                PassAtK.Counts.of(new boolean[] {true, true, true, true}), PassAtK.Counts.of(new boolean[] {false, false, false, false}));
        Map<String, Double> m = new LinkedHashMap<>();
        Evaluator.perSource(tasks, counts, new int[] {1, 4}, m);
        assertEquals(List.of("eval/aime24/avg@4", "eval/aime24/pass@1", "eval/aime24/pass@4", "eval/aime24/tasks",
                "eval/math500/avg@4", "eval/math500/pass@1", "eval/math500/pass@4", "eval/math500/tasks"), List.copyOf(m.keySet()));
        // aime24: task 1 one of four right, task 3 none: avg@4 = (1/4 + 0) / 2, pass@4 = (1 + 0) / 2
        assertEquals(0.125, m.get("eval/aime24/avg@4"), 1e-15);
        assertEquals(0.125, m.get("eval/aime24/pass@1"), 1e-15);
        assertEquals(0.5, m.get("eval/aime24/pass@4"), 1e-15);
        assertEquals(2.0, m.get("eval/aime24/tasks"));
        assertEquals(1.0, m.get("eval/math500/avg@4"));
        assertEquals(1.0, m.get("eval/math500/tasks"));

        Map<String, Double> none = new LinkedHashMap<>();
        Evaluator.perSource(List.of(task("1", null)), counts.subList(0, 1), new int[] {1}, none);
        assertTrue(none.isEmpty(), "tasks without a benchmark: nothing more than the overall numbers");
    }

    @Test
    void aCapOnTheTasksTakesEveryBenchmarkInTurn() {
        // MATH500 first, then AIME24, then AIME25, concatenated as verl's validation files are
        List<Task> test = new java.util.ArrayList<>();
        for (int i = 0; i < 6; i++) test.add(task("m" + i, "math500"));
        for (int i = 0; i < 3; i++) test.add(task("a" + i, "aime24"));
        test.add(task("b0", "aime25"));
        assertEquals(List.of("m0", "m1", "m2", "a0", "a1", "b0"), Evaluator.evaluated(test, 6).stream().map(Task::id).toList(),
                "two of each, the one AIME25 task, then the turns go on over what is left; in file order");
        assertEquals(List.of("m0", "a0", "b0"), Evaluator.evaluated(test, 3).stream().map(Task::id).toList());
        assertEquals(test, Evaluator.evaluated(test, 0));
        assertEquals(test, Evaluator.evaluated(test, 99));
        List<Task> plain = List.of(task("1", null), task("2", null), task("3", null));
        assertEquals(plain.subList(0, 2), Evaluator.evaluated(plain, 2), "without benchmarks: the first n");
    }

    @Test
    void theFieldCanBeTurnedOff() throws Exception {
        Path test = tmp.resolve("t.jsonl");
        Files.writeString(test, "{\"question\": \"1+1=?\", \"answer\": 2, \"data_source\": \"a\"}\n");
        dev.drmas.config.RunConfig off = dev.drmas.config.RunConfig.parse(TrainerEndToEndTest.YAML, List.of("data.source=jsonl",
                "data.train_file=" + test, "data.test_file=" + test, "~data.synthetic", "data.data_source_field=null"));
        assertEquals(null, off.data().dataSourceField());
        assertEquals(null, dev.drmas.workflow.TaskFiles.read(off.data()).test().getFirst().dataSource());
        dev.drmas.config.RunConfig on = dev.drmas.config.RunConfig.parse(TrainerEndToEndTest.YAML, List.of("data.source=jsonl",
                "data.train_file=" + test, "data.test_file=" + test, "~data.synthetic"));
        var split = dev.drmas.workflow.TaskFiles.read(on.data());
        assertEquals("a", split.test().getFirst().dataSource());
        // the training file's is its tasks' data_source too, for a grader command (verl's reward functions branch on it)
        assertEquals("a", split.train().getFirst().dataSource());
    }

    @Test
    void aRunOnAMixedTestFileReportsEachBenchmark() throws Exception {
        Path train = tmp.resolve("train.jsonl"), test = tmp.resolve("test.jsonl");
        StringBuilder tr = new StringBuilder(), te = new StringBuilder();
        // the training file's benchmark field is not read: present on some lines only, it is no error
        for (int i = 0; i < 8; i++) {
            tr.append("{\"question\": \"").append(i).append("+1=?\", \"answer\": ").append(i + 1)
                    .append(i == 3 ? ", \"data_source\": 5" : "").append("}\n");
        }
        for (int i = 0; i < 5; i++) {
            te.append("{\"question\": \"").append(i).append("+2=?\", \"answer\": ").append(i + 2)
                    .append(", \"data_source\": \"").append(i % 2 == 0 ? "even" : "odd").append("\"}\n");
        }
        Files.writeString(train, tr);
        Files.writeString(test, te);
        Path out = tmp.resolve("run");
        try (Trainer t = Trainer.open(new TrainerEndToEndTest().config(out, "data.source=jsonl", "data.train_file=" + train,
                "data.test_file=" + test, "~data.synthetic", "trainer.steps=1", "trainer.eval_freq=1", "trainer.save_freq=0", "eval.tasks=0"),
                new PrintStream(new ByteArrayOutputStream()))) {
            t.train();
        }
        List<JsonNode> lines = TrainerEndToEndTest.metrics(out.resolve("e2e"));
        JsonNode eval = lines.stream().filter(n -> n.has("eval/pass@1")).findFirst().orElseThrow();
        assertEquals(5.0, eval.get("eval/tasks").asDouble());
        assertEquals(3.0, eval.get("eval/even/tasks").asDouble());
        assertEquals(2.0, eval.get("eval/odd/tasks").asDouble());
        for (String s : List.of("even", "odd")) {
            for (String k : List.of("avg@2", "pass@1", "pass@2")) assertTrue(eval.has("eval/" + s + "/" + k), s + " " + k + ": " + eval);
        }
        assertFalse(eval.has("eval/null/tasks"));
        double overall = eval.get("eval/avg@2").asDouble();
        double weighted = (3 * eval.get("eval/even/avg@2").asDouble() + 2 * eval.get("eval/odd/avg@2").asDouble()) / 5;
        assertEquals(overall, weighted, 1e-12, "the overall avg@n is the benchmarks' task-weighted mean");
    }
}
