// ResumeCheck.java — what a resumed run may change. The checkpoint's weights were trained with one
// model shape, one team and one workflow; a config that now asks for another (hidden 256 where the
// checkpoint holds 128) used to be ignored in silence while config.yaml recorded the new value.
// Changes the checkpoint cannot honour are an error naming each key with both values; the rest
// (steps, frequencies, learning rates, the PPO update's batching, logging, sampling) are allowed
// and logged. The earlier config is the checkpoint's own config.yaml (written with it), else the
// run folder's; the shapes are also checked against the checkpoint's config.json, which every
// checkpoint has. The seed and the training data are fixed too when the run goes on training: the
// saved data position counts tasks of their shuffled order (an evaluation may change them); so is
// a KL reference turned on, which only training uses. A model's chat_template_kwargs may change, as
// its sampling may: the policy then sees prompts rendered otherwise (Qwen3 without thinking), which
// the log says; the weights still fit. So may an agent's prompts (agents[i].prompts.*), and
// data.data_source_field, which labels evaluation metrics and scopes task ids (names, not the
// training order). Multi-line or very long values
// (prompts) are shown by the start of their first line, with their length. A model's path may move
// to another folder holding the same model (a requeued job staging it to node-local scratch): its
// tokenizer must match the checkpoint's copy, and with a KL reference that is reloaded from the
// folder (a model that started from its path's weights; a warm-started one's is the run's copy),
// its weight files the old folder's.
package dev.drmas.train;

import dev.drmas.config.ConfigException;
import dev.drmas.config.ModelSize;
import dev.drmas.config.ModelSpec;
import dev.drmas.config.RunConfig;
import dev.drmas.model.ModelConfig;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;

final class ResumeCheck {
    /** The resolved config a checkpoint was written with, inside the checkpoint folder. */
    static final String CONFIG_FILE = "config.yaml";

    private ResumeCheck() {
    }

    /**
     * Throws a ConfigException listing every change {@code checkpoint} cannot honour; logs the others.
     * Returns the changes among those that only training cannot honour (the seed, the training data,
     * a KL reference turned on):
     * an evaluation or a warm start of the same run may make them, and train() refuses them.
     */
    static List<String> check(RunConfig now, Path checkpoint, Path runDir, PrintStream log) {
        List<String> fatal = new ArrayList<>();
        List<String> allowed = new ArrayList<>();
        List<String> forTraining = new ArrayList<>();
        for (String id : now.usedModels()) shapes(id, now.models().get(id), checkpoint, fatal);
        Path earlierFile = Files.isRegularFile(checkpoint.resolve(CONFIG_FILE)) ? checkpoint.resolve(CONFIG_FILE) : runDir.resolve("config.yaml");
        RunConfig earlier = null;
        if (Files.isRegularFile(earlierFile)) {
            // written by another version of drmas (an upgrade between a preemption and the resume): the keys it had that
            // this version does not know are left out, and the rest compared; they used to make the whole comparison
            // fall back to the model shapes, and a changed seed or data then went through in silence
            List<String> unknown = new ArrayList<>();
            try {
                earlier = RunConfig.loadIgnoringUnknownKeys(earlierFile, unknown::add);
            } catch (RuntimeException e) {
                fatal.add(earlierFile + ": cannot be read to compare with (" + e.getMessage() + "); fix it (it is the config the "
                        + "checkpoint was written with) or start a new run");
            }
            if (!unknown.isEmpty()) {
                log.println("drmas: warning: " + earlierFile + " has keys this version of drmas does not know (" + String.join(", ", unknown)
                        + "); they are left out of the comparison with the checkpoint");
            }
        }
        if (earlier != null) {
            Map<String, Object> was = earlier.flat(), is = now.flat();
            Set<String> keys = new LinkedHashSet<>(was.keySet());
            keys.addAll(is.keySet());
            for (String k : keys) {
                Object a = was.get(k), b = is.get(k);
                if (Objects.equals(a, b) || k.equals("run.resume")) continue;
                // a mapping that gained or lost all its entries (chat_template_kwargs): the entries are the changes
                if (emptyMap(a) && !is.containsKey(k) || emptyMap(b) && !was.containsKey(k)) continue;
                String change = k + ": " + show(a, was.containsKey(k)) + " at the checkpoint, " + show(b, is.containsKey(k)) + " now";
                String movedModel = movedModel(k, a, b, now);
                if (movedModel != null) {
                    // the same model in another folder (a requeued job that stages it to node-local scratch): allowed
                    // when what a resume still reads from the folder, its tokenizer and (KL) reference weights, is the same
                    String why = sameModelFolder(movedModel, Path.of((String) a), Path.of((String) b), checkpoint, runDir, now, log);
                    if (why != null) fatal.add(change + " (" + why + ")");
                    else allowed.add(k + ": " + a + " -> " + b);
                    continue;
                }
                if (binding(k, now)) {
                    if (!fatal.stream().anyMatch(f -> f.startsWith(k + ":"))) fatal.add(change);
                } else {
                    allowed.add(k + ": " + show(a, was.containsKey(k)) + " -> " + show(b, is.containsKey(k)));
                    if (bindsTraining(k, now)) forTraining.add(change);
                }
            }
        }
        refuse(checkpoint, fatal);
        if (!allowed.isEmpty()) log.println("drmas: resuming with changed settings: " + String.join("; ", allowed));
        return forTraining;
    }

    /** The error for {@code changes} (key: then, now) that {@code checkpoint} cannot continue with; none: nothing. */
    static void refuse(Path checkpoint, List<String> changes) {
        if (changes.isEmpty()) return;
        throw ConfigException.at("run.resume", "the checkpoint " + checkpoint + " cannot continue with this config: "
                + String.join("; ", changes) + ". Undo the change, or start a new run (another run.name)");
    }

    /**
     * Keys the checkpoint fixes: the shape, family, origin and dtype-independent identity of every
     * model an agent uses, the team (agents, their roles and models) and the workflow (the seed, the
     * training data and a KL reference turned on: bindsTraining).
     */
    private static boolean binding(String key, RunConfig now) {
        if (key.startsWith("agents[") && !isPrompt(key) || key.equals("agents") || key.equals("orchestra.name")) return true;
        for (String id : now.usedModels()) {
            String m = "models." + id + ".";
            if (key.startsWith(m + "size.") || key.equals(m + "family") || key.equals(m + "path") || key.equals(m + "init")) return true;
        }
        return false;
    }

    /** agents[i].prompts or a key under it: the text an agent is prompted with, which the weights do not depend on. */
    private static boolean isPrompt(String key) {
        return key.matches("agents\\[\\d+]\\.prompts(\\..*)?");
    }

    /**
     * Keys that fix a run that goes on training: the seed and the training data, whose shuffled order
     * the saved data_position indexes; and a KL reference turned on now, which would have to be the
     * weights the run started from, long gone (a model with a path reloads its reference from there:
     * nothing is lost for it; unless it started from a warm start, which Policies.reference finds
     * missing, and training refuses then). Evaluation uses none of them.
     */
    private static boolean bindsTraining(String key, RunConfig now) {
        if (key.equals("ppo.reference_model") && now.ppo().referenceModel()
                && now.usedModels().stream().anyMatch(id -> !now.models().get(id).loadsWeights())) return true;
        // data.test_file and data.data_source_field (benchmark labels and id scopes) leave the training tasks as they were
        return key.equals("run.seed") || key.startsWith("data.") && !key.equals("data.test_file") && !key.equals("data.data_source_field");
    }

    /** The model id whose models.id.path changed from one folder to another at {@code key}, else null. */
    private static String movedModel(String key, Object was, Object is, RunConfig now) {
        if (!(was instanceof String) || !(is instanceof String)) return null;
        for (String id : now.usedModels()) if (key.equals("models." + id + ".path")) return id;
        return null;
    }

    /**
     * Why model {@code id}'s new folder is not the checkpoint's model, or null when it is as far as
     * a resume can tell: the weights come from the checkpoint (and the shapes are checked against
     * config.json), but the tokenizer is read from the folder, which must match the copy the
     * checkpoint holds file for file; with ppo.reference_model, when the run keeps no copy of the KL
     * reference (a model that started from its path's weights), it is reloaded from the folder too:
     * its weight files must have the old folder's names and sizes and agree with them at
     * 16 windows spread over each (when the old folder is gone, as node-local scratch is, the log
     * says it could not be compared).
     */
    private static String sameModelFolder(String id, Path was, Path is, Path checkpoint, Path runDir, RunConfig now, PrintStream log) {
        Path kept = checkpoint.resolve("models").resolve(id);
        for (String f : Policies.TOKENIZER_FILES) {
            Path a = kept.resolve(f), b = is.resolve(f);
            boolean inA = Files.isRegularFile(a), inB = Files.isRegularFile(b);
            if (!inA && !inB) continue;
            try {
                if (inA != inB || Files.mismatch(a, b) != -1) return "its " + f + " differs from the one in " + kept;
            } catch (java.io.IOException e) {
                return "cannot compare its " + f + " with " + a + ": " + e.getMessage();
            }
        }
        // the KL reference is reloaded from the folder only when the run keeps no copy of it (a model that started from
        // its path's weights); a warm-started or randomly initialised model's is reference/<id>, whatever the folder holds
        if (!now.ppo().referenceModel() || Policies.keptReference(runDir, checkpoint, id) != null) return null;
        if (!Files.isDirectory(was)) {
            log.println("drmas: warning: models." + id + ".path: the KL reference is now read from " + is + "; " + was
                    + " is gone, so it could not be compared with it");
            return null;
        }
        java.util.Map<String, Long> a = weightFiles(was), b = weightFiles(is);
        if (a == null || b == null) return "cannot list the weight files of " + (a == null ? was : is);
        if (!a.equals(b)) return "its weight files (the KL reference is reloaded from it) differ from " + was + "'s in names or sizes";
        for (String f : a.keySet()) {
            try {
                if (!sameSamples(was.resolve(f), is.resolve(f))) {
                    return "its " + f + " (the KL reference is reloaded from it) differs from " + was + "'s";
                }
            } catch (java.io.IOException e) {
                return "cannot compare its " + f + " with " + was.resolve(f) + ": " + e.getMessage();
            }
        }
        return null;
    }

    /**
     * Whether two files of one size agree at 16 windows of 64 KiB spread from the first byte to the
     * last (1 MiB read of each, where a whole comparison would read a model twice): a copy passes,
     * another model of the same shape (a fine-tuned one) differs at every window.
     */
    private static boolean sameSamples(Path a, Path b) throws java.io.IOException {
        try (var ca = java.nio.channels.FileChannel.open(a); var cb = java.nio.channels.FileChannel.open(b)) {
            long size = ca.size();
            if (size != cb.size()) return false;
            int window = (int) Math.min(size, 1 << 16);
            var ba = java.nio.ByteBuffer.allocate(window);
            var bb = java.nio.ByteBuffer.allocate(window);
            for (int i = 0; i < 16; i++) {
                long at = size <= window ? 0 : (size - window) * i / 15;
                ba.clear();
                bb.clear();
                while (ba.hasRemaining() && ca.read(ba, at + ba.position()) >= 0) { }
                while (bb.hasRemaining() && cb.read(bb, at + bb.position()) >= 0) { }
                if (!ba.flip().equals(bb.flip())) return false;
            }
            return true;
        }
    }

    /** A folder's *.safetensors files by name with their sizes, null when it cannot be listed. */
    private static java.util.Map<String, Long> weightFiles(Path dir) {
        java.util.Map<String, Long> m = new java.util.TreeMap<>();
        try (var s = Files.list(dir)) {
            for (Path f : s.toList()) {
                String n = f.getFileName().toString();
                if (n.endsWith(".safetensors")) m.put(n, Files.size(f));
            }
            return m;
        } catch (java.io.IOException e) {
            return null;
        }
    }

    /** The checkpoint's config.json against what the config now builds for model {@code id}. */
    private static void shapes(String id, ModelSpec spec, Path checkpoint, List<String> fatal) {
        Path file = checkpoint.resolve("models").resolve(id).resolve("config.json");
        if (!Files.isRegularFile(file)) {
            fatal.add("models." + id + ": not in the checkpoint (no " + file + ")");
            return;
        }
        ModelConfig had = ModelConfig.read(file);
        if (spec.loadsWeights()) {
            Path base = spec.path().resolve("config.json");
            if (!Files.isRegularFile(base)) return;  // Policies reports the missing model folder
            ModelConfig want = ModelConfig.read(base);
            same(fatal, "models." + id + ".path (its config.json hidden_size)", had.hiddenSize(), want.hiddenSize());
            same(fatal, "models." + id + ".path (its config.json num_hidden_layers)", had.numLayers(), want.numLayers());
            same(fatal, "models." + id + ".path (its config.json vocab_size)", had.vocabSize(), want.vocabSize());
            return;
        }
        ModelSize s = spec.size();
        String p = "models." + id + ".";
        same(fatal, p + "family", had.family(), spec.family());
        same(fatal, p + "size.hidden", had.hiddenSize(), s.hidden());
        same(fatal, p + "size.layers", had.numLayers(), s.layers());
        same(fatal, p + "size.heads", had.numHeads(), s.heads());
        same(fatal, p + "size.kv_heads", had.numKvHeads(), s.kvHeads());
        same(fatal, p + "size.intermediate", had.intermediateSize(), s.intermediate());
        if (s.headDim() != 0) same(fatal, p + "size.head_dim", had.headDim(), s.headDim());  // else hidden and heads say it
        same(fatal, p + "size.max_positions", had.maxPositionEmbeddings(), s.maxPositions());
        same(fatal, p + "size.tie_embeddings", had.tieWordEmbeddings(), s.tieEmbeddings());
    }

    private static void same(List<String> fatal, String key, Object had, Object want) {
        if (!Objects.equals(had, want)) fatal.add(key + ": " + had + " at the checkpoint, " + want + " now");
    }

    private static boolean emptyMap(Object v) {
        return v instanceof Map<?, ?> m && m.isEmpty();
    }

    /**
     * Values of more than one line or longer than WHOLE_CHARS (prompts) are shown by their first
     * SHOWN_CHARS; paths and other one-line values of up to WHOLE_CHARS are shown whole.
     */
    private static final int SHOWN_CHARS = 60, WHOLE_CHARS = 120;

    static String show(Object v, boolean present) {
        if (!present) return "(absent)";
        if (v == null) return "null";
        String s = v.toString();
        // a prompt quoted whole would bury the other changes under its paragraphs: its first line, cut, and its length
        int end = firstBreak(s);
        if (end == s.length() && s.length() <= WHOLE_CHARS) return s;
        return "\"" + s.substring(0, Math.min(end, SHOWN_CHARS)) + "…\" (" + s.length() + " chars)";
    }

    /** Where the first line of {@code s} ends (any line break Java or YAML knows), else its length. */
    private static int firstBreak(String s) {
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '\n' || c == '\r' || c == '\u0085' || c == '\u2028' || c == '\u2029') return i;
        }
        return s.length();
    }
}
