// ModelOptimizer.java — the optimiser of one model as the update drives it, in full or mixed
// precision. Full precision: AdamW updates the model's parameters from their own .grad (as before).
// Mixed precision (models.<id>.dtype bfloat16 or float16, master_dtype float32), as FSDP's and
// Megatron's: the model's reduced-precision weights serve the forward, backward and generation; the
// optimiser keeps fp32 master weights and fp32 AdamW moments; after every micro-batch's backward the
// reduced-precision .grad is added into an fp32 accumulator and zeroed (Megatron's main_grad), so
// gradients are accumulated, reduced across ranks, measured and clipped in fp32; after each step the
// masters are rounded into the model's weights. bf16 keeps 8 significant bits: an update of relative
// size 1e-6 (the paper's lr) is lost when added to bf16 weights, but not to fp32 masters.
package dev.drmas.train;

import dev.drmas.dist.Collective;
import dev.drmas.model.Scopes;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.NoGradGuard;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;

public final class ModelOptimizer implements AutoCloseable {
    private final Map<String, Tensor> params;  // the model's live parameters
    private final boolean mixed;
    private final Map<String, Tensor> master;  // fp32 copies (mixed) or params itself
    private final Map<String, Tensor> grad32;  // fp32 gradient accumulators (mixed), else null
    private final AdamW adam;
    private final boolean ownsAdam;

    private ModelOptimizer(Map<String, Tensor> params, boolean mixed, Map<String, Tensor> master, Map<String, Tensor> grad32,
                           AdamW adam, boolean ownsAdam) {
        this.params = params;
        this.mixed = mixed;
        this.master = master;
        this.grad32 = grad32;
        this.adam = adam;
        this.ownsAdam = ownsAdam;
    }

    /**
     * The optimiser of {@code params} (a model's live parameters). {@code mixed}: keep fp32 master
     * weights, moments and gradient accumulators (the parameters are in a reduced dtype); else
     * AdamW works on the parameters themselves, in their dtype.
     */
    public static ModelOptimizer create(Map<String, Tensor> params, AdamW.Settings settings, boolean mixed) {
        if (!mixed) return new ModelOptimizer(params, false, params, null, new AdamW(params, settings), true);
        Map<String, Tensor> master = new LinkedHashMap<>(), grad32 = new LinkedHashMap<>();
        try (PointerScope scope = new PointerScope(); NoGradGuard ng = new NoGradGuard()) {
            for (Map.Entry<String, Tensor> e : params.entrySet()) {
                Tensor m = e.getValue().detach().to(ScalarType.Float).clone();
                master.put(e.getKey(), Scopes.retain(m));
                grad32.put(e.getKey(), Scopes.retain(torch.zeros_like(m)));
            }
        }
        return new ModelOptimizer(params, true, Collections.unmodifiableMap(master), Collections.unmodifiableMap(grad32),
                new AdamW(master, settings), true);
    }

    /** Full precision around an existing AdamW of the model's parameters (tests build their own). */
    public static ModelOptimizer wrap(AdamW adam) {
        return new ModelOptimizer(adam.weights(), false, adam.weights(), null, adam, false);
    }

    public boolean mixedPrecision() {
        return mixed;
    }

    public AdamW.Settings settings() {
        return adam.settings();
    }

    public long steps() {
        return adam.steps();
    }

    public double currentLr() {
        return adam.currentLr();
    }

    /**
     * After each backward (each micro-batch): mixed precision adds the parameters' gradients into
     * the fp32 accumulators and zeroes them, so nothing is summed in the reduced dtype. Full
     * precision: nothing (autograd accumulates in .grad).
     */
    public void afterBackward() {
        if (!mixed) return;
        try (PointerScope scope = new PointerScope(); NoGradGuard ng = new NoGradGuard()) {
            for (Map.Entry<String, Tensor> e : params.entrySet()) {
                Tensor g = e.getValue().grad();
                if (!g.defined()) continue;
                grad32.get(e.getKey()).add_(g);  // add_ promotes the bf16 values exactly into fp32
                g.detach_().zero_();
            }
        }
    }

    /** Sums the gradients over the ranks (the fp32 accumulators in mixed precision). */
    public void reduceGradients(Collective dist, String what) {
        if (!mixed) {
            dist.sumGradients(params, what);
            return;
        }
        if (dist.worldSize() == 1) return;
        dist.sumTensors(new ArrayList<>(grad32.values()), what);
    }

    /** The global L2 norm of the gradients AdamW will use. */
    public double gradNorm() {
        return Math.sqrt(GradNorm.squaredSum(grads()));
    }

    /** The norm before clipping; the gradients are scaled to {@code max} when above it (0: no clipping, non-finite: untouched). */
    public double clipGradNorm(double max) {
        List<Tensor> g = grads();
        double norm = Math.sqrt(GradNorm.squaredSum(g));
        GradNorm.scale(g, norm, max);
        return norm;
    }

    private List<Tensor> grads() {
        if (mixed) return new ArrayList<>(grad32.values());
        List<Tensor> g = new ArrayList<>(params.size());
        for (Tensor p : params.values()) g.add(p.grad());
        return g;
    }

    /** One AdamW step; mixed precision then rounds the masters into the model's weights. */
    public void step() {
        if (!mixed) {
            adam.step();
            return;
        }
        adam.step(grad32);
        publish();
    }

    /** Copies the masters into the model's weights (rounded to their dtype). */
    private void publish() {
        try (PointerScope scope = new PointerScope(); NoGradGuard ng = new NoGradGuard()) {
            for (Map.Entry<String, Tensor> e : params.entrySet()) e.getValue().copy_(master.get(e.getKey()));
        }
    }

    /** Drops the gradients (accumulators and the parameters' own). */
    public void zeroGrad() {
        adam.zeroGrad();
        if (!mixed) return;
        try (PointerScope scope = new PointerScope()) {
            for (Tensor p : params.values()) {
                Tensor g = p.grad();
                if (g.defined()) g.detach_().zero_();
            }
            for (Tensor g : grad32.values()) g.zero_();
        }
    }

    /** AdamW's moments by name (live views), as checkpoints store them. */
    public Map<String, Tensor> state() {
        return adam.state();
    }

    /** The fp32 master weights by name (live), or null in full precision (the parameters are the masters). */
    public Map<String, Tensor> masterWeights() {
        return mixed ? master : null;
    }

    /** Restores AdamW's moments and step count (see {@link AdamW#load}). */
    public void load(Map<String, Tensor> state, long steps) {
        adam.load(state, steps);
    }

    /**
     * Restores the fp32 master weights (mixed precision) from {@code weights} by name and rounds
     * them into the model's weights, so that a resumed run continues from the exact masters.
     */
    public void loadMasterWeights(Map<String, Tensor> weights) {
        if (!mixed) throw new IllegalStateException("full precision keeps no master weights");
        try (PointerScope scope = new PointerScope(); NoGradGuard ng = new NoGradGuard()) {
            for (Map.Entry<String, Tensor> e : master.entrySet()) {
                Tensor t = weights.get(e.getKey());
                if (t == null) throw new IllegalArgumentException("the master weights have no tensor " + e.getKey());
                if (!java.util.Arrays.equals(AdamW.shape(t), AdamW.shape(e.getValue()))) {
                    throw new IllegalArgumentException("master weight " + e.getKey() + " has shape "
                            + java.util.Arrays.toString(AdamW.shape(t)) + ", the parameter has "
                            + java.util.Arrays.toString(AdamW.shape(e.getValue())));
                }
                e.getValue().copy_(t);
            }
        }
        publish();
    }

    /**
     * Makes the masters the model's present weights again (mixed precision; nothing otherwise):
     * after something else changed the weights in place (the warm start's own optimiser).
     */
    public void reloadFromWeights() {
        if (!mixed) return;
        try (PointerScope scope = new PointerScope(); NoGradGuard ng = new NoGradGuard()) {
            for (Map.Entry<String, Tensor> e : params.entrySet()) master.get(e.getKey()).copy_(e.getValue());
        }
    }

    /** Bytes this optimiser holds beyond the model's weights and .grad: moments, masters and accumulators. */
    public long stateBytes() {
        long b = 0;
        for (Tensor t : adam.state().values()) b += t.numel() * t.element_size();
        if (mixed) {
            for (Tensor t : master.values()) b += t.numel() * t.element_size();
            for (Tensor t : grad32.values()) b += t.numel() * t.element_size();
        }
        return b;
    }

    @Override
    public void close() {
        if (ownsAdam) adam.close();
        if (!mixed) return;
        for (Tensor t : master.values()) t.releaseReference();
        for (Tensor t : grad32.values()) t.releaseReference();
    }
}
