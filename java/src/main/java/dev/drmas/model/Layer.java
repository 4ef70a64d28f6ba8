// Layer.java — one decoder layer's weights under their HF names, plus transposed views of its
// projection weights for the decoding step's addmm (views share the parameters' storage, so an
// optimiser's in-place updates show in them). The layer's forward is Transformer.layer.
package dev.drmas.model;

import java.util.Map;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.Tensor;

/** A null bias or norm is one this family does not have. */
final class Layer {
    final Tensor inputNorm, q, qBias, k, kBias, v, vBias, o, oBias, qNorm, kNorm, postNorm;
    final Tensor gate, gateBias, up, upBias, down, downBias;
    /** qᵀ, kᵀ, … (views), the right operands of addmm for several rows. */
    final Tensor qT, kT, vT, oT, gateT, upT, downT;

    /** Layer {@code i} of the parameters {@code p} (which stay owned by the model). */
    Layer(Map<String, Tensor> p, int i) {
        String l = "model.layers." + i + ".", a = l + "self_attn.", m = l + "mlp.";
        inputNorm = p.get(l + "input_layernorm.weight");
        q = p.get(a + "q_proj.weight");
        qBias = p.get(a + "q_proj.bias");
        k = p.get(a + "k_proj.weight");
        kBias = p.get(a + "k_proj.bias");
        v = p.get(a + "v_proj.weight");
        vBias = p.get(a + "v_proj.bias");
        o = p.get(a + "o_proj.weight");
        oBias = p.get(a + "o_proj.bias");
        qNorm = p.get(a + "q_norm.weight");
        kNorm = p.get(a + "k_norm.weight");
        postNorm = p.get(l + "post_attention_layernorm.weight");
        gate = p.get(m + "gate_proj.weight");
        gateBias = p.get(m + "gate_proj.bias");
        up = p.get(m + "up_proj.weight");
        upBias = p.get(m + "up_proj.bias");
        down = p.get(m + "down_proj.weight");
        downBias = p.get(m + "down_proj.bias");
        try (PointerScope scope = new PointerScope()) {
            qT = Scopes.retain(q.t());
            kT = Scopes.retain(k.t());
            vT = Scopes.retain(v.t());
            oT = Scopes.retain(o.t());
            gateT = Scopes.retain(gate.t());
            upT = Scopes.retain(up.t());
            downT = Scopes.retain(down.t());
        }
    }

    /** Frees the transposed views (the weights are the model's). */
    void close() {
        for (Tensor t : new Tensor[]{qT, kT, vT, oT, gateT, upT, downT}) t.releaseReference();
    }
}
