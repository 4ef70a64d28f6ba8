// TaskFiles.java — the training and held-out tasks of a run whose data.source is jsonl, read with
// the configured field names; what every workflow that takes JSONL data shares.
package dev.drmas.workflow;

import dev.drmas.config.DataConfig;
import dev.drmas.env.JsonlTasks;
import dev.drmas.env.Task;
import java.util.List;

public final class TaskFiles {
    private TaskFiles() {
    }

    /** The tasks of data.train_file and data.test_file (none when the latter is unset). */
    public static Split read(DataConfig d) {
        // the benchmark labels evaluation metrics: the training file reads it only to scope its tasks' ids
        List<Task> tr = JsonlTasks.read(d.trainFile(), d.questionField(), d.answerField(), d.dataSourceField(), false);
        List<Task> te = d.testFile() == null ? List.of()
                : JsonlTasks.read(d.testFile(), d.questionField(), d.answerField(), d.dataSourceField(), true);
        return new Split(tr, te);
    }

    /** Training and held-out tasks. */
    public record Split(List<Task> train, List<Task> test) {
        public Split {
            train = List.copyOf(train);
            test = List.copyOf(test);
        }
    }
}
