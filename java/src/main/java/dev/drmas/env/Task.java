// Task.java — one problem of a dataset: an id (unique within its dataset, used in logs and
// evaluation reports), the question shown to the agents, and the ground-truth answer as text
// (numbers kept as written, so that "0.50" reaches the checker as "0.50"), plus other answers that
// count as right (open-domain QA lists aliases: "NYC", "New York City"), and the benchmark it comes
// from when the file says (verl's data_source: evaluation reports each benchmark of a mixed test file).
package dev.drmas.env;

import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * @param aliases    further accepted answers besides {@code answer}; empty for most tasks
 * @param dataSource the benchmark the task comes from ("aime24", "nq"), or null when not given
 */
public record Task(String id, String question, String answer, List<String> aliases, String dataSource) {
    public Task {
        Objects.requireNonNull(id, "id");
        Objects.requireNonNull(question, "question");
        Objects.requireNonNull(answer, "answer");
        aliases = List.copyOf(aliases);
    }

    public Task(String id, String question, String answer, List<String> aliases) {
        this(id, question, answer, aliases, null);
    }

    /** A task with one accepted answer. */
    public Task(String id, String question, String answer) {
        this(id, question, answer, List.of());
    }

    /** Every accepted answer: {@code answer} first, then the aliases. */
    public List<String> golds() {
        List<String> all = new ArrayList<>(1 + aliases.size());
        all.add(answer);
        all.addAll(aliases);
        return all;
    }
}
