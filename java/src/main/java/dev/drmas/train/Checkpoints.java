// Checkpoints.java — a run's checkpoints: every model's weights in HF layout (so a checkpoint
// loads in HF transformers too), every optimiser's state as safetensors, and the trainer's own
// state (step, data position, seeds) as JSON. Each checkpoint is written into a temporary folder
// and renamed into place, so a crash never leaves a half checkpoint that resume would pick up.
package dev.drmas.train;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.drmas.model.CausalLm;
import dev.drmas.model.SafeTensors;
import dev.drmas.model.SafeTensorsWriter;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Optional;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.Device;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;

public final class Checkpoints {
    static final String STATE_FILE = "trainer_state.json";
    private static final Pattern STEP_DIR = Pattern.compile("step_(\\d+)");
    private static final ObjectMapper JSON = new ObjectMapper();

    private final Path root;

    /** Checkpoints live in {@code root}/step_N. */
    public Checkpoints(Path root) {
        this.root = root;
    }

    public Path root() {
        return root;
    }

    /** Folder of the checkpoint of {@code step}. */
    public Path dir(long step) {
        return root.resolve(String.format("step_%06d", step));
    }

    /**
     * Writes a checkpoint of {@code step}: models (id → model), their optimisers (id → AdamW) and
     * the trainer state, into a temporary folder renamed to step_N when complete.
     */
    public Path save(long step, Map<String, CausalLm> models, Map<String, AdamW> optims, ObjectNode trainerState)
            throws IOException {
        Files.createDirectories(root);
        Path tmp = root.resolve(String.format("step_%06d.tmp", step));
        deleteTree(tmp);
        Files.createDirectories(tmp);
        for (Map.Entry<String, CausalLm> e : models.entrySet()) {
            e.getValue().save(tmp.resolve("models").resolve(e.getKey()));
        }
        Files.createDirectories(tmp.resolve("optim"));
        for (Map.Entry<String, AdamW> e : optims.entrySet()) {
            AdamW o = e.getValue();
            try (PointerScope scope = new PointerScope()) {
                Map<String, Tensor> state = new LinkedHashMap<>();
                o.state().forEach((k, t) -> state.put(k, t.detach().cpu().contiguous()));
                SafeTensorsWriter.write(tmp.resolve("optim").resolve(e.getKey() + ".safetensors"), state);
            }
        }
        ObjectNode st = trainerState.deepCopy();
        st.put("step", step);
        ObjectNode steps = st.putObject("optimizer_steps");
        optims.forEach((k, o) -> steps.put(k, o.steps()));
        // the state file last: its presence marks a complete checkpoint
        Files.writeString(tmp.resolve(STATE_FILE), JSON.writerWithDefaultPrettyPrinter().writeValueAsString(st));
        Path dest = dir(step);
        deleteTree(dest);
        Files.move(tmp, dest, StandardCopyOption.ATOMIC_MOVE);
        return dest;
    }

    /** The complete checkpoint with the highest step, if any (temporary folders are ignored). */
    public Optional<Path> latest() {
        if (!Files.isDirectory(root)) return Optional.empty();
        try (Stream<Path> s = Files.list(root)) {
            return s.filter(p -> STEP_DIR.matcher(p.getFileName().toString()).matches())
                    .filter(p -> Files.isRegularFile(p.resolve(STATE_FILE)))
                    .max(Comparator.comparingLong(Checkpoints::stepOf));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** The trainer state of a checkpoint folder. */
    public static JsonNode state(Path checkpoint) {
        Path f = checkpoint.resolve(STATE_FILE);
        try {
            return JSON.readTree(Files.readString(f));
        } catch (IOException e) {
            throw new IllegalArgumentException(f + ": cannot read the trainer state (" + e.getMessage() + ")", e);
        }
    }

    /** Loads model {@code id} of a checkpoint. */
    public static CausalLm loadModel(Path checkpoint, String id, ScalarType dtype, Device device) {
        Path d = checkpoint.resolve("models").resolve(id);
        if (!Files.isDirectory(d)) throw new IllegalArgumentException(checkpoint + " has no model '" + id + "' (no " + d + ")");
        return CausalLm.load(d, dtype, device);
    }

    /** Restores optimiser {@code id} of a checkpoint into {@code optim}. */
    public static void loadOptimizer(Path checkpoint, String id, AdamW optim) {
        Path f = checkpoint.resolve("optim").resolve(id + ".safetensors");
        JsonNode steps = state(checkpoint).path("optimizer_steps").path(id);
        if (!steps.canConvertToLong()) throw new IllegalArgumentException(checkpoint + ": no optimizer_steps." + id + " in " + STATE_FILE);
        try (SafeTensors st = SafeTensors.open(f); PointerScope scope = new PointerScope()) {
            Map<String, Tensor> state = new LinkedHashMap<>();
            for (String name : st.tensors().keySet()) {
                Tensor like = optim.state().get(name);
                if (like == null) throw new IllegalArgumentException(f + ": unexpected tensor " + name);
                state.put(name, st.get(name, like.scalar_type().intern(), like.device()));
            }
            optim.load(state, steps.asLong());
        }
    }

    static long stepOf(Path p) {
        Matcher m = STEP_DIR.matcher(p.getFileName().toString());
        return m.matches() ? Long.parseLong(m.group(1)) : -1;
    }

    /** Deletes a folder and everything in it (nothing when it does not exist). */
    public static void deleteTree(Path p) throws IOException {
        if (!Files.exists(p)) return;
        try (Stream<Path> s = Files.walk(p)) {
            for (Path x : s.sorted(Comparator.reverseOrder()).toList()) Files.delete(x);
        }
    }
}
