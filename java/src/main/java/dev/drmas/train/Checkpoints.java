// Checkpoints.java — a run's checkpoints: every model's weights in HF layout and in the model's
// dtype (so a checkpoint loads in HF transformers too), every optimiser's state as safetensors, the
// fp32 master weights of models trained in mixed precision (master/<id>, which resuming loads
// instead of the rounded export, so that it is exact), and the trainer's own state (step, data
// position, seeds) as JSON. The optimiser state is streamed, never held whole on the host (12 bytes
// a parameter with fp32 masters): an unsharded one's file by file from the live tensors, a tensor
// (on a GPU, a slice of one) at a time; a sharded one's by rank 0, which writes the files' headers
// first and each gathered window at its place; each rank resumes from its own part of the mapped
// files. Each checkpoint is written into a temporary folder,
// synced to the disk (files, then folders) and renamed into place, so neither a crash nor a power
// loss leaves a half or empty checkpoint that resume would pick up; a save that fails removes its
// temporary folder and says which checkpoint and folder it was.
package dev.drmas.train;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.drmas.dist.Collective;
import dev.drmas.model.CausalLm;
import dev.drmas.model.SafeTensors;
import dev.drmas.model.SafeTensorsStreamWriter;
import dev.drmas.model.SafeTensorsWriter;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.bytedeco.pytorch.Device;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;

public final class Checkpoints {
    static final String STATE_FILE = "trainer_state.json";
    /** The folder of the fp32 master weights of models trained in mixed precision. */
    static final String MASTER = "master";
    /** The trainer state's entry of the dynamic loss scales: model id → {scale, good_steps}. */
    static final String LOSS_SCALE = "loss_scale";
    /** The suffix of a folder that replaceFolder renamed aside (dest.old) until its replacement is in place. */
    static final String ASIDE = ".old";
    private static final Pattern STEP_DIR = Pattern.compile("step_(\\d+)");
    /**
     * A checkpoint renamed aside while a new save of its step is renamed in (replaceFolder): after a
     * kill between the two renames it is the only copy of its step, listed as that step's checkpoint.
     */
    private static final Pattern ASIDE_DIR = Pattern.compile("step_(\\d+)" + Pattern.quote(ASIDE));
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

    /** What else goes into a checkpoint before it is renamed into place (tokenizer files, the config). */
    public interface Extra {
        void writeInto(Path tmpDir) throws IOException;
    }

    /**
     * Writes a checkpoint of {@code step}: models (id → model), their optimisers (id → AdamW) and
     * the trainer state, into a temporary folder renamed to step_N when complete.
     */
    public Path save(long step, Map<String, CausalLm> models, Map<String, AdamW> optims, ObjectNode trainerState)
            throws IOException {
        return write(step, models, wrap(optims), trainerState, tmp -> { });
    }

    /** As above, with {@code extra} written into the folder too, before the state file and the rename. */
    public Path save(long step, Map<String, CausalLm> models, Map<String, AdamW> optims, ObjectNode trainerState, Extra extra)
            throws IOException {
        return write(step, models, wrap(optims), trainerState, extra);
    }

    private static Map<String, ModelOptimizer> wrap(Map<String, AdamW> optims) {
        Map<String, ModelOptimizer> m = new LinkedHashMap<>();
        optims.forEach((k, o) -> m.put(k, ModelOptimizer.wrap(o)));
        return m;
    }

    /**
     * As above from the models' optimisers: moments by name, and for mixed precision the fp32
     * master weights, which go to master/id. A sharded optimiser's state is gathered here, a
     * collective: this is rank 0's side, and every other rank calls {@link #takePart} meanwhile.
     */
    public Path write(long step, Map<String, CausalLm> models, Map<String, ModelOptimizer> optims, ObjectNode trainerState,
                      Extra extra) throws IOException {
        Path tmp = root.resolve(String.format("step_%06d.tmp", step));
        List<ModelOptimizer> gathers = new ArrayList<>();  // the sharded ones, in the order the other ranks gather them
        for (ModelOptimizer o : optims.values()) if (o.sharded()) gathers.add(o);
        int[] started = {0};
        try {
            return writeFolder(step, tmp, models, optims, trainerState, extra, started);
        } catch (IOException e) {
            // the other ranks are in (or on their way to) the gathers not started here: take part,
            // so that the ranks' collectives stay paired, unless a collective itself failed (a
            // gather that was started goes to its end whatever its files do)
            if (!(e.getCause() instanceof dev.drmas.dist.DistributedException)) {
                try {
                    takePart(gathers.subList(started[0], gathers.size()));
                } catch (IOException | RuntimeException more) {
                    e.addSuppressed(more);
                }
            }
            throw e;
        }
    }

    private Path writeFolder(long step, Path tmp, Map<String, CausalLm> models, Map<String, ModelOptimizer> optims,
                             ObjectNode trainerState, Extra extra, int[] started) throws IOException {
        return replaceFolder(tmp, dir(step), "the checkpoint of step " + step, into -> {
            for (Map.Entry<String, CausalLm> e : models.entrySet()) {
                e.getValue().save(tmp.resolve("models").resolve(e.getKey()));
            }
            Files.createDirectories(tmp.resolve("optim"));
            for (Map.Entry<String, ModelOptimizer> e : optims.entrySet()) {
                if (e.getValue().sharded()) {
                    writeGathered(tmp, e.getKey(), e.getValue(), started);
                    continue;
                }
                // the live moments and masters, streamed by the writer a tensor (on a GPU a slice)
                // at a time: a host copy of each, all kept until the last was written, was 8 bytes
                // a parameter (12 with masters) at once on a GPU, and on the CPU wherever a
                // parameter is not contiguous (its moments and master are laid out like it)
                ModelOptimizer.Snapshot o = e.getValue().gatherState();
                SafeTensorsWriter.write(tmp.resolve("optim").resolve(e.getKey() + ".safetensors"), o.state());
                if (o.master() != null) {
                    SafeTensorsWriter.writeCheckpoint(tmp.resolve(MASTER).resolve(e.getKey()), o.master(), CausalLm.DEFAULT_SHARD_BYTES);
                }
            }
            extra.writeInto(tmp);
            ObjectNode st = trainerState.deepCopy();
            st.put("step", step);
            ObjectNode steps = st.putObject("optimizer_steps");
            optims.forEach((k, o) -> steps.put(k, o.steps()));
            // a dynamic loss scale goes on from where it was (float16: LossScaler)
            optims.forEach((k, o) -> {
                if (o.lossScaler() != null && o.lossScaler().isDynamic()) {
                    st.with(LOSS_SCALE).putObject(k).put("scale", o.lossScaler().scale()).put("good_steps", o.lossScaler().goodSteps());
                }
            });
            // the state file last: its presence marks a complete checkpoint
            Files.writeString(tmp.resolve(STATE_FILE), JSON.writerWithDefaultPrettyPrinter().writeValueAsString(st));
        });
    }

    /**
     * Rank 0's side of a sharded optimiser's gather: the headers of optim/id.safetensors and of
     * master/id (as {@link SafeTensorsWriter} would write the gathered tensors) first, then each
     * window's pieces at their places as they arrive. The files are complete when the gather
     * returns; the folder's sync before its rename makes them durable. {@code started} counts the
     * gathers begun, for {@link #write}'s failure path.
     */
    private static void writeGathered(Path tmp, String id, ModelOptimizer o, int[] started) throws IOException {
        ModelOptimizer.StateLayout layout = o.stateLayout();
        try (SafeTensorsStreamWriter moments = SafeTensorsStreamWriter.file(tmp.resolve("optim").resolve(id + ".safetensors"),
                     specs(layout.moments()));
             SafeTensorsStreamWriter masters = layout.masters().isEmpty() ? null
                     : SafeTensorsStreamWriter.checkpoint(tmp.resolve(MASTER).resolve(id), specs(layout.masters()),
                     CausalLm.DEFAULT_SHARD_BYTES)) {
            started[0]++;
            o.gatherState(moments::put, masters == null ? null : masters::put);
            moments.finish();
            if (masters != null) masters.finish();
        }
    }

    private static List<SafeTensorsWriter.Spec> specs(Map<String, long[]> shapes) {
        List<SafeTensorsWriter.Spec> out = new ArrayList<>();
        shapes.forEach((name, shape) -> out.add(new SafeTensorsWriter.Spec(name, SafeTensors.Dtype.F32, shape)));
        return out;
    }

    /**
     * What every rank but 0 does while rank 0 writes a checkpoint of {@code optims}: its part of
     * the sharded optimisers' gathers, in the order rank 0 writes them, keeping nothing.
     */
    public static void takePart(Map<String, ModelOptimizer> optims) throws IOException {
        takePart(optims.values());
    }

    private static void takePart(java.util.Collection<ModelOptimizer> optims) throws IOException {
        for (ModelOptimizer o : optims) if (o.sharded()) o.gatherState(null, null);
    }

    /**
     * A folder written whole or not at all: {@code writer} fills {@code tmp} (made empty first), which
     * is synced (the data on the disk before the name that says it is complete) and put in place of
     * {@code dest}, and the parent synced. A folder cannot be renamed over a full one, so an existing
     * dest is first renamed aside to dest.old (as WarmStart.save does with sft/models.old), tmp renamed
     * to dest, and the aside copy deleted: a kill between the two renames leaves the old folder
     * complete under dest.old, which {@link #complete} lists as its step's checkpoint, and the next
     * replacement of dest (or the next start, {@link #removeUnfinished}, once dest is back) removes.
     * On any failure tmp is removed and the error reads "cannot write {@code what} (in tmp; removed):
     * why", or "(in tmp; not removed: why)" when that failed too; dest is then as it was.
     */
    static Path replaceFolder(Path tmp, Path dest, String what, Extra writer) throws IOException {
        Path aside = dest.resolveSibling(dest.getFileName() + ASIDE);
        boolean movedAside = false;
        try {
            Durable.createFolders(dest.getParent());
            // a copy left aside by an earlier kill: stale beside a dest (the swap was done), else the only copy of
            // dest, which stays until the new dest is in place
            if (Files.exists(dest)) deleteTree(aside);
            deleteTree(tmp);
            Files.createDirectories(tmp);
            writer.writeInto(tmp);
            Durable.syncTree(tmp);
            if (Files.exists(dest)) {
                Files.move(dest, aside, StandardCopyOption.ATOMIC_MOVE);
                movedAside = true;
            }
            Files.move(tmp, dest, StandardCopyOption.ATOMIC_MOVE);
            movedAside = false;
            Durable.syncFolder(dest.getParent());
        } catch (IOException | RuntimeException e) {
            if (movedAside) {  // tmp could not take its place: the old dest goes back
                try {
                    Files.move(aside, dest, StandardCopyOption.ATOMIC_MOVE);
                } catch (IOException | RuntimeException back) {
                    e.addSuppressed(back);
                }
            }
            String removed = "removed";
            try {
                deleteTree(tmp);
            } catch (IOException | RuntimeException cleanup) {
                e.addSuppressed(cleanup);
                removed = "not removed: " + reason(cleanup);
            }
            throw new IOException("cannot write " + what + " (in " + tmp + "; " + removed + "): " + reason(e), e);
        }
        // dest is complete and in place: the aside copy is only space now (a failure here leaves it for the next
        // replacement or start to remove, not a failed save)
        try {
            deleteTree(aside);
        } catch (IOException | RuntimeException e) {
            // (left for removeUnfinished or the next replacement of dest)
        }
        return dest;
    }

    private static String reason(Exception e) {
        if (e instanceof java.nio.file.FileSystemException f && f.getReason() != null) {
            return (f.getFile() != null ? f.getFile() + ": " : "") + f.getReason();
        }
        if (e instanceof java.nio.file.AccessDeniedException f) {  // (its message is the path alone: an immutable file, a read-only folder)
            return f.getFile() + ": permission denied";
        }
        if (e.getMessage() != null) return e.getMessage();
        return e.getClass().getSimpleName();
    }

    /**
     * Fails now, naming the folder, when checkpoints cannot be written there, rather than at the
     * first save after an hour of training (an existing read-only or immutable checkpoints/).
     */
    public void checkWritable() throws IOException {
        Path probe = root.resolve(".write-test-" + ProcessHandle.current().pid());
        try {
            Durable.createFolders(root);
            Files.deleteIfExists(probe);
            Files.createFile(probe);
            Files.delete(probe);
        } catch (IOException e) {
            throw new IOException("checkpoints folder " + root + " is not writable: " + reason(e), e);
        }
    }

    /** The complete checkpoint with the highest step, if any (temporary folders are ignored). */
    public Optional<Path> latest() {
        List<Path> all = complete();
        return all.isEmpty() ? Optional.empty() : Optional.of(all.get(all.size() - 1));
    }

    /**
     * The complete checkpoints (step_N with a trainer state), oldest first; a step's aside copy
     * (step_N.old, left by a kill inside replaceFolder's swap) stands for it when there is no complete step_N.
     */
    public List<Path> complete() {
        if (!Files.isDirectory(root)) return List.of();
        try (Stream<Path> s = Files.list(root)) {
            return s.filter(p -> STEP_DIR.matcher(p.getFileName().toString()).matches()
                            || ASIDE_DIR.matcher(p.getFileName().toString()).matches() && !isComplete(unaside(p)))
                    .filter(Checkpoints::isComplete)
                    .sorted(Comparator.comparingLong(Checkpoints::stepOf)).toList();
        } catch (IOException e) {
            throw new UncheckedIOException("cannot list the checkpoints in " + root + ": " + e.getMessage(), e);
        }
    }

    /**
     * trainer.keep_last: deletes the complete checkpoints of steps up to {@code saved} (the one just
     * saved) but the newest {@code keep} of them (none when keep is 0), and returns them. A deletion
     * that fails is named and ends the pruning; what was deleted before stays deleted (a checkpoint is
     * removed whole or, failing midway, left without its state file: resume and {@link #latest}
     * ignore it, and the next start removes it, {@link #removeUnfinished}).
     */
    public List<Path> prune(int keep, long saved) throws IOException {
        if (keep <= 0) return List.of();
        // only checkpoints older than the one just saved: a higher step in the folder (another line of the run) is not
        // "newer" than the save, and must not make the save itself the oldest
        List<Path> all = complete().stream().filter(p -> stepOf(p) <= saved).toList();
        List<Path> old = all.subList(0, Math.max(0, all.size() - keep));
        for (Path p : old) {
            try {
                Files.deleteIfExists(p.resolve(STATE_FILE));  // first: what is left of it is not a checkpoint any more
                deleteTree(p);
            } catch (IOException e) {
                throw new IOException("trainer.keep_last: cannot delete the old checkpoint " + p + ": " + reason(e), e);
            }
        }
        return List.copyOf(old);
    }

    /**
     * Removes the temporary folders (step_N.tmp) that saves interrupted by a kill or a power loss
     * left behind (a save removes its own on a failure it survives), and step_N folders without a
     * state file (a keep_last deletion that failed midway), and returns them. Only the run
     * folder's holder of the run lock may call this: another run's save could be under way.
     */
    public List<Path> removeUnfinished() throws IOException {
        if (!Files.isDirectory(root)) return List.of();
        List<Path> tmps;
        try (Stream<Path> s = Files.list(root)) {
            // a save's temporary folder, or a checkpoint folder without its state file: a deletion by keep_last that
            // failed midway (the state file goes first), which nothing would list or delete again; or a step's
            // aside copy (replaceFolder) beside its complete folder, or incomplete itself (the only copy of its
            // step, complete and listed by complete(), stays)
            tmps = s.filter(p -> p.getFileName().toString().matches("step_\\d+\\.tmp")
                    || STEP_DIR.matcher(p.getFileName().toString()).matches() && Files.isDirectory(p)
                    && !Files.exists(p.resolve(STATE_FILE))
                    || ASIDE_DIR.matcher(p.getFileName().toString()).matches() && Files.isDirectory(p)
                    && (isComplete(unaside(p)) || !isComplete(p))).sorted().toList();
        }
        for (Path p : tmps) {
            try {
                deleteTree(p);
            } catch (IOException e) {
                throw new IOException("cannot remove the unfinished checkpoint folder " + p + ": " + reason(e), e);
            }
        }
        return tmps;
    }

    /** The trainer state of a checkpoint folder. */
    public static JsonNode state(Path checkpoint) {
        Path f = checkpoint.resolve(STATE_FILE);
        try {
            return JSON.readTree(Files.readString(f));
        } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
            throw new IllegalArgumentException(f + ": cannot read the trainer state (not valid JSON ("
                    + dev.drmas.model.JsonProblem.describe(e) + ")" + dev.drmas.model.JsonProblem.at(e.getLocation()) + ")", e);
        } catch (IOException e) {
            throw new IllegalArgumentException(f + ": cannot read the trainer state (" + e.getMessage() + ")", e);
        }
    }

    /**
     * Loads model {@code id} of a checkpoint: from its fp32 master weights when it has them (the
     * most precise copy), else from the HF export.
     */
    public static CausalLm loadModel(Path checkpoint, String id, ScalarType dtype, Device device) {
        Path d = checkpoint.resolve("models").resolve(id);
        if (!Files.isDirectory(d)) throw new IllegalArgumentException(checkpoint + " has no model '" + id + "' (no " + d + ")");
        Path master = checkpoint.resolve(MASTER).resolve(id);
        if (!Files.isDirectory(master)) return CausalLm.load(d, dtype, device);
        try (SafeTensors st = SafeTensors.open(master)) {
            return CausalLm.fromCheckpoint(dev.drmas.model.ModelConfig.read(d.resolve("config.json")), st, dtype, device);
        }
    }

    /** Restores optimiser {@code id} of a checkpoint into {@code optim}. */
    public static void loadOptimizer(Path checkpoint, String id, AdamW optim) {
        loadOptimizer(checkpoint, id, ModelOptimizer.wrap(optim));
    }

    /**
     * The same for an optimiser in full or mixed precision: mixed also restores its fp32 master
     * weights when the checkpoint has them. Every tensor is read from the mapped files straight into
     * the live state (each tensor, not the whole state, passes through memory on its way: on a GPU,
     * a copy of every moment beside the live ones was 8 bytes a parameter more at resume); a sharded
     * optimiser reads only its own part of each. What is missing or of another shape is named before
     * anything changes.
     * <p>Sharded, this is a collective (the masters read are spread over every rank's weights), in
     * this order: each rank opens and checks every file it will read; then a ready point ("every
     * rank's files of model id", {@link Collective#awaitReady}), where a rank that failed so far,
     * having announced it (Trainer.open does), stops the others with its reason: failing after it,
     * it left them in the spreading until distributed.timeout_s, blamed on its absence; then the
     * ranks check that all of them have master/id or none (else some would spread and the others
     * not: both sides waiting until the timeout); then the reads, the spreading and the moments.
     */
    public static void loadOptimizer(Path checkpoint, String id, ModelOptimizer optim) {
        Path master = checkpoint.resolve(MASTER).resolve(id);
        Path f = checkpoint.resolve("optim").resolve(id + ".safetensors");
        boolean withMasters = optim.keepsMasterWeights() && Files.isDirectory(master);
        SafeTensors ms = null, st = null;
        try {
            // 1. open and check all this rank will read: nothing collective yet, nothing changed
            if (withMasters) {
                try {
                    ms = SafeTensors.open(master);
                    optim.checkMasterWeights(source(ms));
                } catch (IllegalArgumentException e) {
                    throw named(master, e);
                }
            }
            JsonNode trainerState = state(checkpoint);
            JsonNode steps = trainerState.path("optimizer_steps").path(id);
            if (!steps.canConvertToLong()) throw new IllegalArgumentException(checkpoint + ": no optimizer_steps." + id + " in " + STATE_FILE);
            SavedScale scale = lossScale(checkpoint, trainerState, id, optim.lossScaler());
            try {
                st = SafeTensors.open(f);
                for (String name : st.tensors().keySet()) {
                    // exp_avg.<param> or exp_avg_sq.<param>, as ModelOptimizer.state() names them
                    int dot = name.indexOf('.');
                    String moment = dot < 0 ? "" : name.substring(0, dot), param = name.substring(dot + 1);
                    if (!(moment.equals("exp_avg") || moment.equals("exp_avg_sq")) || !optim.parameterNames().contains(param)) {
                        throw new IllegalArgumentException(f + ": unexpected tensor " + name);
                    }
                }
                optim.checkState(source(st));
            } catch (IllegalArgumentException e) {
                throw named(f, e);
            }
            // 2. sharded: every rank has its files, and all of them spread masters or none
            Collective dist = optim.shardGroup();
            if (dist != null) {
                dist.awaitReady("every rank's files of model '" + id + "'");
                dist.requireSame(new double[] {withMasters ? 1 : 0}, 0, "whether the checkpoint has " + MASTER + "/" + id + " (1) or "
                        + "not (0)", "this rank " + (withMasters ? "has " : "has no ") + master + "; a rank that has the fp32 master "
                        + "weights of model '" + id + "' spreads them over every rank's weights, a collective the others would not "
                        + "join: every rank must see the same checkpoint folder");
            }
            // 3. read: this rank's part (sharded) or the whole, the masters spread over the ranks' weights, the moments
            try {
                if (withMasters) optim.loadMasterWeights(source(ms));
            } catch (IllegalArgumentException e) {
                throw named(master, e);
            }
            try {
                optim.load(source(st), steps.asLong());
            } catch (IllegalArgumentException e) {
                throw named(f, e);
            }
            if (scale != null) optim.lossScaler().restore(scale.scale(), scale.goodSteps());
        } finally {
            if (st != null) st.close();
            if (ms != null) ms.close();
        }
    }

    /**
     * The dynamic loss scale of model {@code id} in the trainer state ({scale, good_steps}), checked;
     * null where {@code scaler} is not dynamic, or the checkpoint has none (its run did not scale
     * the loss dynamically: the scale starts afresh, at loss_scale_init).
     */
    private record SavedScale(double scale, long goodSteps) {
    }

    private static SavedScale lossScale(Path checkpoint, JsonNode trainerState, String id, LossScaler scaler) {
        if (scaler == null || !scaler.isDynamic()) return null;
        JsonNode e = trainerState.path(LOSS_SCALE).path(id);
        if (e.isMissingNode()) return null;
        JsonNode scale = e.path("scale"), good = e.path("good_steps");
        String where = checkpoint.resolve(STATE_FILE) + ": " + LOSS_SCALE + "." + id;
        if (!scale.isNumber() || !(scale.asDouble() > 0) || scale.asDouble() > LossScaler.MAX) {
            throw new IllegalArgumentException(where + ".scale must be a number > 0 that float32 holds, got " + scale);
        }
        if (!good.canConvertToLong() || !good.isIntegralNumber() || good.asLong() < 0) {
            throw new IllegalArgumentException(where + ".good_steps must be an integer >= 0, got " + good);
        }
        return new SavedScale(scale.asDouble(), good.asLong());
    }

    static ModelOptimizer.StateSource source(SafeTensors st) {
        return new ModelOptimizer.StateSource() {
            @Override
            public long[] shape(String name) {
                SafeTensors.Info i = st.tensors().get(name);
                return i == null ? null : i.shape();
            }

            @Override
            public void read(String name, long first, Tensor into) {
                st.read(name, first, into);
            }
        };
    }

    /** {@code e} with the file it is about in front, unless it names it already. */
    private static IllegalArgumentException named(Path file, IllegalArgumentException e) {
        String m = String.valueOf(e.getMessage());
        return m.contains(file.toString()) ? e : new IllegalArgumentException(file + ": " + m, e);
    }

    /** The step of a checkpoint folder, step_N or its aside copy step_N.old; -1 for any other name. */
    static long stepOf(Path p) {
        Matcher m = STEP_DIR.matcher(p.getFileName().toString());
        if (!m.matches()) m = ASIDE_DIR.matcher(p.getFileName().toString());
        return m.matches() ? Long.parseLong(m.group(1)) : -1;
    }

    private static boolean isComplete(Path checkpoint) {
        return Files.isRegularFile(checkpoint.resolve(STATE_FILE));
    }

    /** step_N of an aside copy step_N.old. */
    private static Path unaside(Path aside) {
        String n = aside.getFileName().toString();
        return aside.resolveSibling(n.substring(0, n.length() - ASIDE.length()));
    }

    /** Deletes a folder and everything in it (nothing when it does not exist). */
    public static void deleteTree(Path p) throws IOException {
        if (!Files.exists(p)) return;
        try (Stream<Path> s = Files.walk(p)) {
            for (Path x : s.sorted(Comparator.reverseOrder()).toList()) Files.delete(x);
        }
    }
}
