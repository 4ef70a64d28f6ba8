// MathTasks.java — the tasks of a math run: the built-in arithmetic generator (data.synthetic) or
// JSONL problems. Shared by the workflows that solve math problems (math, proposer-aggregator).
package dev.drmas.workflow.math;

import dev.drmas.config.DataConfig;
import dev.drmas.workflow.TaskFiles;

public final class MathTasks {
    private MathTasks() {
    }

    /** Training and held-out tasks of {@code d}. */
    public static TaskFiles.Split of(DataConfig d) {
        if (d.source() == DataConfig.Source.JSONL) return TaskFiles.read(d);
        ArithmeticData s = d.synthetic(ArithmeticData.class);
        var gen = new SyntheticArithmetic(2, s.operands(), 1, s.digits(), String.join("", s.operators()), s.allowNegative());
        var split = gen.split(s.trainSize(), s.testSize(), s.seed());
        return new TaskFiles.Split(split.train(), split.test());
    }
}
