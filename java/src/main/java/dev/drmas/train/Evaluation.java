// Evaluation.java — what an evaluation found: its metrics (eval/avg@n, eval/pass@k, per benchmark,
// the workload's) and each held-out task's correct count, which `drmas eval` writes to the run
// folder (eval/step_N.json and eval/step_N.tasks.jsonl) so that a result outlives the terminal.
package dev.drmas.train;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.drmas.config.EvalConfig;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.List;
import java.util.Map;

/**
 * @param metrics the logged metrics; @param tasks each evaluated task's result, in test-file order
 * @param kept    the file that kept the chunks' results on the way (rank 0's, when asked for), which the
 *                caller removes once it has written the results; null when none
 */
public record Evaluation(Map<String, Double> metrics, List<TaskResult> tasks, Path kept) {
    private static final ObjectMapper JSON = new ObjectMapper();

    /** One held-out task: its id, its benchmark (null when the test file names none), n samples, {@code correct} of them right. */
    public record TaskResult(String id, String source, int n, int correct) {
    }

    /**
     * Writes {@code dir}/step_{@code step}.json (the step, the checkpoint evaluated, the eval settings and
     * the metrics) and step_{@code step}.tasks.jsonl (one line a task: id, data_source, n, correct), each
     * through a temporary file renamed into place: an earlier evaluation of the step is replaced whole.
     *
     * @return the two files
     */
    public List<Path> write(Path dir, long step, Path checkpoint, EvalConfig ec) {
        ObjectNode o = JSON.createObjectNode();
        o.put("step", step);
        o.put("checkpoint", checkpoint == null ? null : checkpoint.toString());
        ObjectNode settings = o.putObject("eval");
        settings.put("tasks", ec.tasks()).put("k", ec.k()).put("samples", ec.samplesPerTask()).put("temperature", ec.temperature())
                .put("top_p", ec.topP()).put("top_k", ec.topK());
        ObjectNode m = o.putObject("metrics");
        metrics.forEach((k, v) -> m.put(k, v));  // (a metric that is not finite is written as the JSON the mapper allows: a string)
        StringBuilder lines = new StringBuilder();
        for (TaskResult t : tasks) {
            ObjectNode l = JSON.createObjectNode();
            l.put("id", t.id());
            if (t.source() != null) l.put("data_source", t.source());
            l.put("n", t.n()).put("correct", t.correct());
            lines.append(l).append('\n');
        }
        Path json = dir.resolve("step_" + step + ".json"), perTask = dir.resolve("step_" + step + ".tasks.jsonl");
        try {
            Files.createDirectories(dir);
            replace(perTask, lines.toString());
            replace(json, o.toPrettyString() + "\n");
        } catch (IOException e) {
            throw new UncheckedIOException("writing the evaluation to " + dir + ": " + e.getMessage(), e);
        }
        return List.of(json, perTask);
    }

    // forced to disk before the rename: the caller then removes the partial results, the only other copy
    private static void replace(Path file, String text) throws IOException {
        Path tmp = file.resolveSibling(file.getFileName() + ".tmp");
        try (var ch = java.nio.channels.FileChannel.open(tmp, java.nio.file.StandardOpenOption.CREATE, java.nio.file.StandardOpenOption.WRITE,
                java.nio.file.StandardOpenOption.TRUNCATE_EXISTING)) {
            PartialEvaluation.writeAll(ch, text);
        }
        Files.move(tmp, file, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
    }
}
