// TrainerConfig.java — `trainer:`: how long training runs (steps, or epochs over the training tasks) and
// how often it logs, evaluates and checkpoints.
package dev.drmas.config;

/**
 * @param steps            training steps; default 100; not used when {@code epochs} is set
 * @param epochs           0 (default): train {@code steps}; N: train N passes over the training tasks,
 *                         N × ⌊tasks / rollout.tasks_per_step⌋ steps (verl's total_epochs, whose train
 *                         loader drops each pass's last partial batch: the same step count)
 * @param evalFreq         evaluate every this many steps and after the last; 0 = never; default 10
 * @param evalBeforeTrain  also evaluate before the first step (the "before" of the demo's
 *                         table); default true
 * @param saveFreq         checkpoint every this many steps and after the last; 0 = never;
 *                         default 50
 * @param keepLast         keep only the newest this many checkpoints of the run: after each save
 *                         the older ones are deleted (verl's max_actor_ckpt_to_keep); 0 = keep
 *                         all (default)
 * @param logFreq          print and write metrics every this many steps, &gt;= 1; default 1
 * @param gradNormPerAgent also measure each agent's gradient norm on a shared model (an extra
 *                         backward per agent); default false
 */
public record TrainerConfig(int steps, int epochs, int evalFreq, boolean evalBeforeTrain, int saveFreq, int keepLast, int logFreq,
                            boolean gradNormPerAgent) {
    public TrainerConfig {
        Check.positive(steps, "steps");
        Check.nonNegative(epochs, "epochs");
        Check.nonNegative(evalFreq, "eval_freq");
        Check.nonNegative(saveFreq, "save_freq");
        Check.nonNegative(keepLast, "keep_last");
        Check.positive(logFreq, "log_freq");
    }

    public static TrainerConfig defaults() {
        return new TrainerConfig(100, 0, 10, true, 50, 0, 1, false);
    }

    /**
     * The steps the run trains to: {@code steps}, or with {@code epochs} set, epochs × ⌊{@code trainTasks} /
     * {@code tasksPerStep}⌋ (an error naming trainer.epochs when the tasks fill no step, or the count passes
     * an int).
     */
    public int totalSteps(int trainTasks, int tasksPerStep) {
        if (epochs == 0) return steps;
        long perEpoch = tasksPerStep > 0 ? trainTasks / tasksPerStep : 0;
        if (perEpoch == 0) {
            throw ConfigException.at("trainer.epochs", "is " + epochs + ", but the " + trainTasks + " training task(s) fill no step of "
                    + "rollout.tasks_per_step " + tasksPerStep + "; use more training tasks, fewer tasks a step, or trainer.steps");
        }
        long total = epochs * perEpoch;
        if (total > Integer.MAX_VALUE) {
            throw ConfigException.at("trainer.epochs", "is " + epochs + ": " + epochs + " × " + perEpoch + " steps a pass is more than "
                    + Integer.MAX_VALUE + " steps");
        }
        return (int) total;
    }
}
