// SettingException.java — a bad value in one of the algo settings (LossConfig, NormConfig),
// naming the setting's key (clip_low, eps, …) apart from the problem, so that the config layer
// reports it under its full key path (ppo.clip_low) without checking the value a second time.
package dev.drmas.algo;

public final class SettingException extends IllegalArgumentException {
    private final String key;
    private final String problem;

    SettingException(String key, String problem) {
        super(key + ": " + problem);
        this.key = key;
        this.problem = problem;
    }

    /** The setting, as the config spells it (clip_low). */
    public String key() {
        return key;
    }

    /** What is wrong with its value ("must be in [0, 1), got 1"). */
    public String problem() {
        return problem;
    }

    static void require(boolean ok, String key, String problem) {
        if (!ok) throw new SettingException(key, problem);
    }

    /** A number in a message: 1 rather than 1.0, else Java's shortest exact form (1.0E-6). */
    public static String num(double v) {
        if (v == Math.rint(v) && Math.abs(v) < 1e15) return Long.toString((long) v);
        return Double.toString(v);
    }
}
