// DataConfig.java — the `data:` section: where the tasks come from, JSONL files with configurable
// field names or the built-in generators (the default, so that a run needs no download): synthetic
// arithmetic for the math workflow, the synthetic knowledge base for the search workflow.
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
 * @param synthetic     the arithmetic generator's knobs (math, source synthetic)
 * @param knowledgeBase the knowledge base's knobs (search, source synthetic)
 */
public record DataConfig(Source source, Path trainFile, Path testFile, String questionField, String answerField,
                         SyntheticData synthetic, KnowledgeBaseData knowledgeBase) {

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
        Check.given(synthetic, "synthetic");
        Check.given(knowledgeBase, "knowledge_base");
    }

    public static DataConfig defaults() {
        return new DataConfig(Source.SYNTHETIC, null, null, "question", "answer", SyntheticData.defaults(),
                KnowledgeBaseData.defaults());
    }
}
