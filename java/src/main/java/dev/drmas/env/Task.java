// Task.java — one problem of a dataset: an id (unique within its dataset, used in logs and
// evaluation reports), the question shown to the agents, and the ground-truth answer as text
// (numbers kept as written, so that "0.50" reaches the checker as "0.50").
package dev.drmas.env;

import java.util.Objects;

public record Task(String id, String question, String answer) {
    public Task {
        Objects.requireNonNull(id, "id");
        Objects.requireNonNull(question, "question");
        Objects.requireNonNull(answer, "answer");
    }
}
