// Advantages.java — row advantages from scores and (uid, traj, agent) keys under a
// NormConfig: GRPO, Dr. MAS, the two ablations (ARCHITECTURE §5) or any other mode descriptor,
// computed by the native kernel drmas_advantage_f32 (drmas_advantage_trusted_f32 for the trainer's own ids). Java arrays are read in place (no copy) on the CPU; LibTorch
// tensors run on the CPU or, when they live there, on CUDA.
package dev.drmas.algo;

import dev.drmas.bindings.AbiIndices;
import dev.drmas.bindings.Backend;
import dev.drmas.bindings.Kernels;
import java.lang.foreign.MemorySegment;
import java.lang.ref.Reference;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;

public final class Advantages {
    private Advantages() {}

    /**
     * @param advantages  one per row
     * @param diagnostics field-major: {@code diagnostics[f * U*K + u*K + k]} for the fields
     *                    {@link AbiIndices}{@code .DIAG_*}
     */
    public record Result(float[] advantages, double[] diagnostics) {}

    /** Where the forms on Java arrays run: the CPU, which reads the arrays in place (tensors run where they live). */
    public static final Backend ARRAYS_BACKEND = Backend.CPU;

    /** {@code c} as the kernel's config: the mode as its descriptor, the enums as DRMAS_* values (their ordinals). */
    public static Kernels.NormParams params(NormConfig c) {
        AdvantageMode m = c.mode();
        return new Kernels.NormParams(m.agentMean(), m.agentStd(), m.trajectoryNumerator(), c.globalPooling().ordinal(),
                c.singleton().ordinal(), c.unbiased() ? 1 : 0, c.scaleByStd(), c.eps());
    }

    /** Advantage of every row; ids are dense in [0, numUids), [0, numTrajs), [0, numAgents). */
    public static float[] compute(NormConfig c, float[] scores, int[] uid, int[] traj, int[] agent,
                                  int numUids, int numTrajs, int numAgents) {
        return run(c, scores, uid, traj, agent, numUids, numTrajs, numAgents, false, false).advantages();
    }

    /** As {@link #compute}, plus the per-(uid, agent) statistics and Lemma 4.2's inflation factor. */
    public static Result computeWithDiagnostics(NormConfig c, float[] scores, int[] uid, int[] traj, int[] agent,
                                                int numUids, int numTrajs, int numAgents) {
        return run(c, scores, uid, traj, agent, numUids, numTrajs, numAgents, true, false);
    }

    /**
     * As {@link #computeWithDiagnostics}, for ids the caller built itself (the trainer's rollout
     * batch): drmas_advantage_trusted_f32, the same bits with no separate validation pass; bad ids
     * are still an error, but the arrays returned are then never seen.
     */
    public static Result computeWithDiagnosticsOwnIds(NormConfig c, float[] scores, int[] uid, int[] traj, int[] agent,
                                                      int numUids, int numTrajs, int numAgents) {
        return run(c, scores, uid, traj, agent, numUids, numTrajs, numAgents, true, true);
    }

    /** DIAG_FIELDS doubles per (uid, agent) segment, in one Java array: an IllegalArgumentException naming the counts past its limit. */
    private static int diagnosticsSize(int numUids, int numAgents) {
        if (numUids < 0 || numAgents < 0) return 0;  // Kernels.advantage refuses them, naming them
        long size = (long) numUids * numAgents * AbiIndices.DIAG_FIELDS;  // (ints: no long overflow)
        if (size > Integer.MAX_VALUE - 8) {
            throw new IllegalArgumentException("diagnostics: " + numUids + " uids x " + numAgents + " agents x " + AbiIndices.DIAG_FIELDS
                    + " values are more than a Java array holds");
        }
        return (int) size;
    }

    private static Result run(NormConfig c, float[] scores, int[] uid, int[] traj, int[] agent,
                              int numUids, int numTrajs, int numAgents, boolean diag, boolean trusted) {
        int n = scores.length;
        TensorViews.requireSameLength("scores", n, "uid", uid.length);
        TensorViews.requireSameLength("scores", n, "agent", agent.length);
        if (traj != null) TensorViews.requireSameLength("scores", n, "traj", traj.length);
        float[] adv = new float[n];
        double[] d = diag ? new double[diagnosticsSize(numUids, numAgents)] : null;
        Kernels.advantage(ARRAYS_BACKEND, params(c), trusted, n, MemorySegment.ofArray(scores), MemorySegment.ofArray(uid),
                traj == null ? null : MemorySegment.ofArray(traj), MemorySegment.ofArray(agent),
                numUids, numTrajs, numAgents, MemorySegment.ofArray(adv), d == null ? null : MemorySegment.ofArray(d), null);
        return new Result(adv, d);
    }

    /**
     * Tensor form: float32 scores and int32 ids, 1-D, contiguous, all on one device (CPU, or CUDA
     * when libdrmas has it; CUDA work goes on LibTorch's current stream of that device, see
     * {@link TorchStreams}). traj may be null with row pooling. Returns a new float32 tensor on the
     * same device.
     */
    public static Tensor compute(NormConfig c, Tensor scores, Tensor uid, Tensor traj, Tensor agent,
                                 long numUids, long numTrajs, long numAgents) {
        Backend b = TensorViews.backendOf("scores", scores);
        long n = scores.numel();
        MemorySegment s = TensorViews.view("scores", scores, ScalarType.Float, n, b);
        MemorySegment u = TensorViews.view("uid", uid, ScalarType.Int, n, b);
        MemorySegment t = TensorViews.view("traj", traj, ScalarType.Int, n, b);
        MemorySegment a = TensorViews.view("agent", agent, ScalarType.Int, n, b);
        Tensor out = torch.empty_like(scores);
        Kernels.advantage(b, params(c), n, s, u, t, a, numUids, numTrajs, numAgents,
                TensorViews.view("advantages", out, ScalarType.Float, n, b), null, TorchStreams.current(scores));
        // the call reads the tensors' memory through the segments: the tensors must outlive it (a
        // caller's temporary could otherwise be freed by JavaCPP's GC-driven deallocator mid-call)
        Reference.reachabilityFence(scores);
        Reference.reachabilityFence(uid);
        Reference.reachabilityFence(traj);
        Reference.reachabilityFence(agent);
        return out;
    }
}
