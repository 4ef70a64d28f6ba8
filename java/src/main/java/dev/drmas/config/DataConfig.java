// DataConfig.java — the `data:` section: where the tasks come from, JSONL files with configurable
// field names or the workflow's built-in generator (the default, so that a run needs no download),
// whose knobs (`data.synthetic`) are a record of the workflow's own: synthetic arithmetic for the
// math workflows, the synthetic knowledge base for search.
package dev.drmas.config;

import dev.drmas.algo.ConfigEnum;
import java.nio.file.Path;

/**
 * @param source        {@code synthetic} (default) or {@code jsonl}
 * @param trainFile     JSONL training tasks, one object per line; required when source is jsonl
 * @param testFile      JSONL held-out tasks for evaluation; required when source is jsonl and
 *                      trainer.eval_freq &gt; 0
 * @param questionField the JSONL field holding the question; default {@code question}
 * @param answerField   the JSONL field holding the ground-truth answer (a string, a number, or
 *                      for search a list of accepted answers); default {@code answer}
 * @param dataSourceField the JSONL field naming a task's benchmark, as verl's data_source (default
 *                      {@code data_source}; null: none); a test file whose lines have it (all or
 *                      none; JSON null counts as absent) is evaluated per benchmark too; in
 *                      both files it scopes a line's id (ids unique within a benchmark), and
 *                      the training file reads it for nothing else
 * @param synthetic     the built-in generator's knobs, of the workflow's type (source synthetic);
 *                      null for a workflow without a generator
 */
public record DataConfig(Source source, Path trainFile, Path testFile, String questionField, String answerField,
                         String dataSourceField, @WorkflowSchema.Typed(WorkflowSchema.Part.SYNTHETIC_DATA) Record synthetic) {

    public enum Source implements ConfigEnum {
        SYNTHETIC("synthetic"), JSONL("jsonl");

        private final String configName;

        Source(String configName) {
            this.configName = configName;
        }

        @Override
        public String configName() {
            return configName;
        }
    }

    public DataConfig {
        Check.given(source, "source");
        Check.that(source != Source.JSONL || trainFile != null, "train_file", "is required when data.source is jsonl");
        Check.notBlank(questionField, "question_field");
        Check.notBlank(answerField, "answer_field");
        if (dataSourceField != null) Check.notBlank(dataSourceField, "data_source_field");
    }

    /**
     * The defaults of workflow {@code workflow}: its generator with default knobs (a workflow
     * without one has none here, and a run must then set data.source: jsonl).
     */
    public static DataConfig defaults(String workflow) {
        Class<? extends Record> type = WorkflowSchema.named(workflow).syntheticDataType();
        return new DataConfig(Source.SYNTHETIC, null, null, "question", "answer", "data_source", type == null ? null : Binder.defaultsOf(type));
    }

    public static DataConfig defaults() {
        return defaults(OrchestraConfig.DEFAULT_WORKFLOW);
    }

    /** The generator's knobs as the workflow's record type; a clear error for data.source jsonl. */
    public <T extends Record> T synthetic(Class<T> type) {
        if (!type.isInstance(synthetic)) {
            throw new IllegalStateException("data.synthetic is " + (synthetic == null ? "not set" : "a " + synthetic.getClass().getName())
                    + ", not " + type.getName());
        }
        return type.cast(synthetic);
    }
}
