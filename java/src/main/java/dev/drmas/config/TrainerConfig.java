// TrainerConfig.java — `trainer:`: how long training runs and how often it logs, evaluates and
// checkpoints.
package dev.drmas.config;

/**
 * @param steps            training steps; default 100
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
public record TrainerConfig(int steps, int evalFreq, boolean evalBeforeTrain, int saveFreq, int keepLast, int logFreq,
                            boolean gradNormPerAgent) {
    public TrainerConfig {
        Check.positive(steps, "steps");
        Check.nonNegative(evalFreq, "eval_freq");
        Check.nonNegative(saveFreq, "save_freq");
        Check.nonNegative(keepLast, "keep_last");
        Check.positive(logFreq, "log_freq");
    }

    public static TrainerConfig defaults() {
        return new TrainerConfig(100, 10, true, 50, 0, 1, false);
    }
}
