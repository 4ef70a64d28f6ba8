// AdvantageMode.java — what an advantage mode means (ARCHITECTURE §5): which segment the mean and
// the std come from, and whether the numerator is the trajectory's mean score. This is what
// crosses the C ABI (drmas_norm_config's mean_from, std_from, numerator), so the native kernels
// have no table of modes: NormMode is the table of named ones, and any other implementation of
// this interface runs as well.
package dev.drmas.algo;

public interface AdvantageMode {
    /** The name in configs and messages. */
    String configName();

    /** Whether the mean comes from the (uid, agent) segment rather than the group. */
    boolean agentMean();

    /** Whether the std comes from the (uid, agent) segment rather than the group. */
    boolean agentStd();

    /** Whether x_i is the trajectory's mean score S_t under trajectory pooling (else the row's own score). */
    boolean trajectoryNumerator();
}
