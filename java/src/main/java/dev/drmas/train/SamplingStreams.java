// SamplingStreams.java — the keys of the sampler's random streams: one stream per (step,
// trajectory, turn), so that a turn's draws do not depend on which other requests share its batch
// or which rank generates it. The key packs its parts into bit fields; their bounds are checked at
// start-up (a workflow allowing more turns than the field holds is a config error), not assumed.
//   training step s:  ((s + 1) << 24) + traj · 64 + turn   (traj < 2^18 a step, turn < 64)
//   evaluation:        −2^40 + traj · 64 + turn             (negative: never a training key)
package dev.drmas.train;

import dev.drmas.config.ConfigException;
import dev.drmas.config.RunConfig;
import dev.drmas.workflow.Workload;

record SamplingStreams(long base) {
    static final int TURN_BITS = 6, TRAJ_BITS = 18;
    /** Agent turns an episode may take. */
    static final int MAX_TURNS = 1 << TURN_BITS;
    /** Trajectories a training step may have (all ranks). */
    static final long MAX_TRAJECTORIES = 1L << TRAJ_BITS;
    private static final long EVAL_BASE = -(1L << 40);

    static SamplingStreams training(long step) {
        return new SamplingStreams((step + 1) << (TURN_BITS + TRAJ_BITS));
    }

    static SamplingStreams evaluation() {
        return new SamplingStreams(EVAL_BASE);
    }

    /** The stream of turn {@code turn} of global trajectory {@code traj}. */
    long key(long traj, int turn) {
        if (turn < 0 || turn >= MAX_TURNS) throw new IllegalStateException("turn " + turn + " outside [0, " + MAX_TURNS + ")");
        long limit = base == EVAL_BASE ? -EVAL_BASE / MAX_TURNS : MAX_TRAJECTORIES;
        if (traj < 0 || traj >= limit) throw new IllegalStateException("trajectory " + traj + " outside [0, " + limit + ")");
        return base + traj * MAX_TURNS + turn;
    }

    /** Fails, naming the setting, when a run could make a key that the fields cannot hold. */
    static void check(RunConfig cfg, Workload w) {
        int turns = w.maxTurnsPerEpisode();
        if (turns > MAX_TURNS) {
            throw ConfigException.at("orchestra.options", "workflow '" + cfg.orchestra().name() + "' can take up to " + turns
                    + " agent turns an episode with these options; the sampler's random streams hold at most " + MAX_TURNS
                    + " (fewer rounds or turns)");
        }
        long trajs = (long) cfg.rollout().tasksPerStep() * cfg.rollout().rolloutsPerTask();
        if (trajs > MAX_TRAJECTORIES) {
            throw ConfigException.at("rollout.tasks_per_step", "× rollout.rollouts_per_task = " + trajs
                    + " trajectories a step; the sampler's random streams hold at most " + MAX_TRAJECTORIES);
        }
    }
}
