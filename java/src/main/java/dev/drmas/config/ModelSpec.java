// ModelSpec.java — one entry of `models:` (model id → spec): where a model comes from (an HF
// folder, or a fresh tiny transformer of a family and size), its dtype and its optimiser. Agents
// name a model id; agents with the same id share the model and its optimiser.
package dev.drmas.config;

import dev.drmas.algo.ConfigEnum;
import dev.drmas.model.Family;
import dev.drmas.model.ModelConfig;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;

/**
 * @param path   an HF model folder (config.json, safetensors, tokenizer.json); null (default) for
 *               a model built from {@code family} and {@code size} with the built-in tokenizer
 * @param init   {@code auto} (default): the folder's weights when path is set, else random;
 *               {@code random}: random weights (of the folder's shape when path is set);
 *               {@code path}: the folder's weights (path required)
 * @param family {@code qwen2}, {@code qwen3} (default) or {@code llama}: the architecture of a
 *               model without path (a folder's config.json names its own)
 * @param size   the shape of a model without path
 * @param dtype  {@code float32} (default), {@code bfloat16} or {@code float16}: the weights of the
 *               forward, backward and generation, and the activations (on the CPU too, slower)
 * @param masterDtype {@code float32} (default): the precision of the master weights the optimiser
 *               updates, of its AdamW moments and of the accumulated, clipped gradients, as FSDP's
 *               and Megatron's mixed precision (with dtype float32 they are the weights
 *               themselves); equal to a reduced {@code dtype}: pure reduced-precision training,
 *               which a warning flags (an update of relative size below ~4e-3 rounds to nothing in
 *               bfloat16)
 * @param activationCheckpointing keep only each decoder layer's input for the backward pass and
 *               recompute the layer there (less memory, one more forward of the layers); default false
 * @param optim  the AdamW settings of this model's optimiser (its agents may override them)
 */
public record ModelSpec(Path path, Init init, Family family, ModelSize size, Dtype dtype, Dtype masterDtype,
                        boolean activationCheckpointing, OptimConfig optim) {

    public enum Init implements ConfigEnum {
        AUTO("auto"), RANDOM("random"), PATH("path");

        private final String configName;

        Init(String configName) {
            this.configName = configName;
        }

        @Override
        public String configName() {
            return configName;
        }
    }

    /** The names HF config.json uses (torch_dtype), so that they pass straight through. */
    public enum Dtype implements ConfigEnum {
        FLOAT32("float32"), BFLOAT16("bfloat16"), FLOAT16("float16");

        private final String configName;

        Dtype(String configName) {
            this.configName = configName;
        }

        @Override
        public String configName() {
            return configName;
        }
    }

    public ModelSpec {
        Check.given(init, "init");
        Check.that(init != Init.PATH || path != null, "path", "is required when init is path");
        Check.given(family, "family");
        Check.given(size, "size");
        Check.given(dtype, "dtype");
        Check.given(masterDtype, "master_dtype");
        Check.that(masterDtype == Dtype.FLOAT32 || masterDtype == dtype, "master_dtype",
                "must be float32 or the model's dtype (" + dtype.configName() + "), got " + masterDtype.configName());
        Check.given(optim, "optim");
    }

    public static ModelSpec defaults() {
        return new ModelSpec(null, Init.AUTO, Family.QWEN3, ModelSize.defaults(), Dtype.FLOAT32, Dtype.FLOAT32, false,
                OptimConfig.defaults());
    }

    /** Whether training starts from the weights in {@code path} (else from random weights). */
    public boolean loadsWeights() {
        return init == Init.PATH || (init == Init.AUTO && path != null);
    }

    /** Whether the optimiser keeps master weights apart from the model's (dtype reduced, master float32). */
    public boolean mixedPrecision() {
        return dtype != masterDtype;
    }

    /** The shape of a model without path: {@code family} at {@code size}, for a tokenizer of {@code vocabSize} ids. */
    public ModelConfig toModelConfig(int vocabSize, List<Integer> eosTokenIds) {
        return new ModelConfig(family, size.hidden(), size.intermediate(), size.layers(), size.heads(), size.kvHeads(),
                size.effectiveHeadDim(), 1e-6, size.ropeTheta(), null, vocabSize, size.tieEmbeddings(), false, false,
                size.maxPositions(), dtype.configName(), null, eosTokenIds, Map.of());
    }
}
