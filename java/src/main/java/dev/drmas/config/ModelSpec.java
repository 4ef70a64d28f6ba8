// ModelSpec.java — one entry of `models:` (model id → spec): where a model comes from (an HF
// folder, or a fresh tiny transformer of a family and size), its dtype, the extra variables of its
// chat template and its optimiser. Agents name a model id; agents with the same id share the model
// and its optimiser.
package dev.drmas.config;

import dev.drmas.algo.ConfigEnum;
import dev.drmas.model.Family;
import dev.drmas.model.ModelConfig;
import dev.drmas.tokenizer.ChatRenderers;
import java.math.BigInteger;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * @param path   an HF model folder (config.json, safetensors, tokenizer.json); null (default) for
 *               a model built from {@code family} and {@code size} with the built-in tokenizer
 * @param init   {@code auto} (default): the folder's weights when path is set, else random;
 *               {@code random}: random weights (of the folder's config.json shape when path is
 *               set); {@code path}: the folder's weights (path required). Whatever init says, a
 *               model with a warm start (`drmas sft`'s weights, run.warm_start) starts from that,
 *               and a resumed run from its checkpoint
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
 * @param lossScale {@code auto} (default): {@code dynamic} for float16 weights with float32
 *               masters, else {@code none}; {@code dynamic}: the backward runs on loss × S and the
 *               gradients are divided by S in fp32 (torch.amp's GradScaler): a step whose gradient
 *               is not finite is skipped and S halves, S doubles after loss_scale_growth_interval
 *               steps taken in a row; a number > 0: that S always (a non-finite step is still
 *               skipped); {@code none}. Scaling is for float16 with float32 masters only: bfloat16
 *               and float32 have float32's range, and pure float16 (master_dtype float16) has no
 *               fp32 gradient to divide (GradScaler refuses to unscale float16 gradients too)
 * @param lossScaleInit the first S of dynamic scaling (default 65536 = 2^16, as GradScaler)
 * @param lossScaleGrowthInterval the steps in a row after which dynamic scaling doubles S
 *               (default 2000, as GradScaler)
 * @param activationCheckpointing keep only each decoder layer's input for the backward pass and
 *               recompute the layer there (less memory, one more forward of the layers); default false
 * @param chatTemplateKwargs extra variables of the tokenizer's chat template, name → YAML value, in
 *               every chat drmas renders for this model (rollouts, evaluation, the warm start's
 *               demonstrations): HF's {@code apply_chat_template(..., **kwargs)}, verl's
 *               {@code data.apply_chat_template_kwargs}, e.g. {@code enable_thinking: false} for
 *               Qwen3; default none. Names are identifiers other than those the renderer sets
 *               itself (ChatRenderers.RENDERER_VARIABLES); a model without path (the built-in
 *               tokenizer, which has no template) takes none
 * @param optim  the AdamW settings of this model's optimiser (its agents may override them)
 */
public record ModelSpec(Path path, Init init, Family family, ModelSize size, Dtype dtype, Dtype masterDtype, String lossScale,
                        double lossScaleInit, int lossScaleGrowthInterval, boolean activationCheckpointing, Map<String, Object> chatTemplateKwargs, OptimConfig optim) {

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

    /** How the loss of a model is scaled, resolved from loss_scale (auto taken by the dtypes). */
    public record LossScaling(Mode mode, double fixedScale) {
        public enum Mode { NONE, DYNAMIC, FIXED }
    }

    /** loss_scale's default. */
    public static final String LOSS_SCALE_AUTO = "auto";
    /** loss_scale_init's and loss_scale_growth_interval's defaults: torch.amp.GradScaler's. */
    public static final double LOSS_SCALE_INIT = 65536;
    public static final int LOSS_SCALE_GROWTH_INTERVAL = 2000;

    public ModelSpec {
        Check.given(init, "init");
        Check.that(init != Init.PATH || path != null, "path", "is required when init is path");
        Check.given(family, "family");
        Check.given(size, "size");
        // Qwen2's HF code before transformers 4.48, and vLLM's, take hidden / heads and ignore a head_dim in
        // config.json: a checkpoint with another would load with wrong shapes there
        Check.that(family != Family.QWEN2 || size.headDim() == 0 || size.headDim() * size.heads() == size.hidden(), "size.head_dim",
                "must be 0 or hidden / heads (" + size.hidden() + " / " + size.heads() + ") for family qwen2, got " + size.headDim()
                        + ": Qwen2's HF code before transformers 4.48 and vLLM's take hidden / heads, so its checkpoints would"
                        + " not load there (qwen3 and llama read head_dim)");
        Check.given(dtype, "dtype");
        Check.given(masterDtype, "master_dtype");
        Check.that(masterDtype == Dtype.FLOAT32 || masterDtype == dtype, "master_dtype",
                "must be float32 or the model's dtype (" + dtype.configName() + "), got " + masterDtype.configName());
        checkLossScale(lossScale, lossScaleInit, lossScaleGrowthInterval, dtype, masterDtype);
        chatTemplateKwargs = templateArgs(chatTemplateKwargs, path);
        Check.given(optim, "optim");
    }

    public static ModelSpec defaults() {
        return new ModelSpec(null, Init.AUTO, Family.QWEN3, ModelSize.defaults(), Dtype.FLOAT32, Dtype.FLOAT32, LOSS_SCALE_AUTO,
                LOSS_SCALE_INIT, LOSS_SCALE_GROWTH_INTERVAL, false, Map.of(),
                OptimConfig.defaults());
    }

    /**
     * The chat template variables of command-line assignments {@code NAME=VALUE} (the --template-arg
     * of drmas tokenize and generate), each VALUE read as a config override's value is (YAML: false,
     * 3, 0.5, text, [1, 2], {k: v}) and checked as chat_template_kwargs is, in the order given.
     *
     * @throws ConfigException naming the option and the assignment
     */
    public static Map<String, Object> parseTemplateArgs(List<String> assignments, String option) {
        Map<String, Object> out = new LinkedHashMap<>();
        for (String a : assignments) {
            String origin = option + " '" + a + "'";
            int eq = a.indexOf('=');
            if (eq < 0) throw ConfigException.in(origin, "expected NAME=VALUE, e.g. enable_thinking=false");
            String name = a.substring(0, eq).strip();
            String problem = ChatRenderers.variableProblem(name);
            if (problem != null) throw ConfigException.in(origin, problem);
            if (out.containsKey(name)) throw ConfigException.in(origin, "'" + name + "' is given twice");
            try {
                out.put(name, frozen(ConfigTree.parseValue(a.substring(eq + 1).strip(), origin), name));
            } catch (ConfigException e) {
                throw e.origin() != null ? e : new ConfigException(origin, e.key(), e.problem());
            }
        }
        return Collections.unmodifiableMap(out);
    }

    /** Checked and frozen; null (a {@code chat_template_kwargs:} with every entry commented out) is none. */
    @SuppressWarnings("unchecked")
    private static Map<String, Object> templateArgs(Map<String, Object> args, Path path) {
        if (args == null || args.isEmpty()) return Map.of();
        for (String name : args.keySet()) {
            String problem = ChatRenderers.variableProblem(name);
            if (problem != null) throw ConfigException.at(KeyPaths.child("chat_template_kwargs", name), problem);
        }
        Check.that(path != null, "chat_template_kwargs", "is for a tokenizer's chat template, but this model has no path: its "
                + "built-in tokenizer has none (drmas renders ChatML, which reads no variables); remove chat_template_kwargs or set path");
        return (Map<String, Object>) frozen(args, "chat_template_kwargs");
    }

    /**
     * A deep unmodifiable copy of a template value (mappings keep their order; lists may hold nulls),
     * of the types the chat template engine takes: what YAML gives, less integers past 64 bits.
     */
    private static Object frozen(Object v, String at) {
        if (v instanceof Map<?, ?> m) {
            Map<String, Object> out = new LinkedHashMap<>();
            for (Map.Entry<?, ?> e : m.entrySet()) {
                if (!(e.getKey() instanceof String k)) throw ConfigException.at(at, "has a key that is not a string: " + e.getKey());
                out.put(k, frozen(e.getValue(), KeyPaths.child(at, k)));
            }
            return Collections.unmodifiableMap(out);
        }
        if (v instanceof List<?> l) {
            List<Object> out = new ArrayList<>();
            for (int i = 0; i < l.size(); i++) out.add(frozen(l.get(i), KeyPaths.element(at, i)));
            return Collections.unmodifiableList(out);
        }
        if (v instanceof Integer i) return i.longValue();  // as YAML reads it back, so that a record built in code equals its reload
        if (v == null || v instanceof String || v instanceof Boolean || v instanceof Long || v instanceof Double) return v;
        if (v instanceof BigInteger) throw ConfigException.at(at, "is out of the integer range of a template (64 bits): " + v);
        throw ConfigException.at(at, "expected a boolean, number, string, list or mapping, got " + v.getClass().getSimpleName());
    }

    /**
     * loss_scale is auto, dynamic, none or a number > 0; an explicit scale needs float16 weights with
     * float32 masters; loss_scale_init and loss_scale_growth_interval are valid, and changed from their
     * defaults only where the scaling is dynamic (elsewhere nothing reads them).
     */
    private static void checkLossScale(String lossScale, double init, int interval, Dtype dtype, Dtype masterDtype) {
        Check.given(lossScale, "loss_scale");
        String v = lossScale.strip();
        boolean named = v.equals(LOSS_SCALE_AUTO) || v.equals("dynamic") || v.equals("none");
        if (!named) {
            double x = parseScale(v);
            Check.that(!Double.isNaN(x), "loss_scale", "must be auto, dynamic, none or a number > 0, got '" + lossScale + "'");
            Check.positiveFloat32(x, "loss_scale");
        }
        Check.positiveFloat32(init, "loss_scale_init");
        Check.positive(interval, "loss_scale_growth_interval");
        if (!v.equals(LOSS_SCALE_AUTO) && !v.equals("none")) {
            Check.that(dtype == Dtype.FLOAT16, "loss_scale", "is '" + lossScale + "', but dtype is " + dtype.configName()
                    + ": loss scaling is for float16 weights (" + (dtype == Dtype.FLOAT32 ? "float32" : "bfloat16 has float32's range and")
                    + " does not underflow where float16 does); remove it, or set none");
            Check.that(masterDtype == Dtype.FLOAT32, "loss_scale", "is '" + lossScale + "', but master_dtype is float16: scaling "
                    + "needs float32 master weights, whose float32 gradient it divides by the scale (as torch's GradScaler, which "
                    + "refuses to unscale float16 gradients); set master_dtype: float32, or loss_scale: none");
        }
        boolean dynamic = v.equals("dynamic") || (v.equals(LOSS_SCALE_AUTO) && dtype == Dtype.FLOAT16 && masterDtype == Dtype.FLOAT32);
        if (!dynamic) {
            String why = "is read by dynamic loss scaling only, and loss_scale is '" + lossScale + "'"
                    + (v.equals(LOSS_SCALE_AUTO) ? " (dynamic for float16 weights with float32 masters; this model has dtype "
                    + dtype.configName() + ", master_dtype " + masterDtype.configName() + ")" : "");
            Check.that(init == LOSS_SCALE_INIT, "loss_scale_init", why + "; remove it");
            Check.that(interval == LOSS_SCALE_GROWTH_INTERVAL, "loss_scale_growth_interval", why + "; remove it");
        }
    }

    /** A number as YAML or Python writes one (1024, 1024.0, 6.5e4), else NaN. */
    private static double parseScale(String v) {
        if (!v.matches("[-+]?([0-9]+\\.?[0-9]*|\\.[0-9]+)([eE][-+]?[0-9]+)?")) return Double.NaN;
        return Double.parseDouble(v);
    }

    /** How this model's loss is scaled: loss_scale with auto resolved (dynamic for float16 with float32 masters). */
    public LossScaling lossScaling() {
        String v = lossScale.strip();
        return switch (v) {
            case "none" -> new LossScaling(LossScaling.Mode.NONE, 1);
            case "dynamic" -> new LossScaling(LossScaling.Mode.DYNAMIC, 1);
            case LOSS_SCALE_AUTO -> dtype == Dtype.FLOAT16 && masterDtype == Dtype.FLOAT32
                    ? new LossScaling(LossScaling.Mode.DYNAMIC, 1) : new LossScaling(LossScaling.Mode.NONE, 1);
            default -> new LossScaling(LossScaling.Mode.FIXED, Double.parseDouble(v));
        };
    }

    /** Whether the model's own weights are those in {@code path} (else random); a warm start or checkpoint comes first. */
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
