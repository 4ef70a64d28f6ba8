// RunSettings.java — the `run:` section: what the run is called, where it writes, how it resumes,
// on which device and how many threads it uses.
package dev.drmas.config;

import dev.drmas.algo.ConfigEnum;
import java.nio.file.Path;
import java.util.Locale;

/**
 * @param name      the run's name; its folder is {@code output_dir/name}. Default: the config
 *                  file's name without .yaml when loaded from a file ({@code drmas} otherwise);
 *                  not inherited through {@code extends:}
 * @param seed      the seed of everything random in the run (model init, sampling, mini-batch
 *                  order); default 1
 * @param outputDir where run folders go; default {@code runs}
 * @param resume    {@code auto} (default): continue from the latest checkpoint in the run folder
 *                  if there is one; {@code never}: start afresh (training into a run folder
 *                  that already holds checkpoints or metrics is an error: it would mix the two
 *                  runs); otherwise the path of a checkpoint folder
 *                  ({@code step_N/}) to continue from
 * @param device    {@code cpu}, {@code cuda} or {@code auto} (default: cuda when a GPU is usable)
 * @param threads   CPU threads for LibTorch and the native kernels; 0 (default) = all cores
 * @param warmStart the folder of warm-start weights (one sub-folder per model, as `drmas sft`
 *                  writes them) that models without a path start from; null (default) = the run's
 *                  own {@code sft/models}. `drmas experiment` points every run of a seed at one
 *                  warm start, so that the modes it compares start from the same weights
 */
public record RunSettings(String name, long seed, Path outputDir, String resume, Device device, int threads, Path warmStart) {

    /** Where the run computes. */
    public enum Device implements ConfigEnum {
        CPU("cpu"), CUDA("cuda"), AUTO("auto");

        private final String configName;

        Device(String configName) {
            this.configName = configName;
        }

        @Override
        public String configName() {
            return configName;
        }
    }

    public RunSettings {
        Check.notBlank(name, "name");
        Check.given(outputDir, "output_dir");
        checkName(name);
        checkResume(resume);
        Check.given(device, "device");
        Check.nonNegative(threads, "threads");
    }

    /** The run folder is output_dir/name: a name that leaves output_dir (../x, /abs) would write elsewhere. */
    private static void checkName(String name) {
        Path n;
        try {
            n = Path.of(name);
        } catch (java.nio.file.InvalidPathException e) {
            throw ConfigException.at("name", "'" + name + "' is not a valid folder name (" + e.getReason() + ")");
        }
        Path norm = n.normalize();
        Check.that(!n.isAbsolute() && !norm.toString().isEmpty() && !norm.startsWith(".."), "name",
                "'" + name + "' would put the run folder outside run.output_dir; give a name inside it (a/b is fine, ../a and /a are not)");
    }

    /**
     * resume is auto, never or a checkpoint path; `resume: false` (YAML's boolean, bound as the
     * string "false") would otherwise be the path of a checkpoint folder named false.
     */
    private static void checkResume(String resume) {
        Check.notBlank(resume, "resume");
        String r = resume.strip().toLowerCase(Locale.ROOT);
        boolean no = r.equals("false") || r.equals("no") || r.equals("off");
        boolean yes = r.equals("true") || r.equals("yes") || r.equals("on");
        Check.that(!no && !yes, "resume", "'" + resume + "' is not auto, never or a checkpoint path: write "
                + (no ? "never to start afresh" : "auto to continue from the latest checkpoint") + " (a folder named " + resume
                + " is ./" + resume + ")");
    }

    public static RunSettings defaults() {
        return new RunSettings("drmas", 1, Path.of("runs"), "auto", Device.AUTO, 0, null);
    }

    /** Where the warm-start weights are read from: warm_start, else the run's own sft/models. */
    public Path warmStartDir() {
        return warmStart != null ? warmStart : runDir().resolve("sft").resolve("models");
    }

    /** {@code output_dir/name}. */
    public Path runDir() {
        return outputDir.resolve(name);
    }

    public boolean resumeAuto() {
        return resume.equals("auto");
    }

    public boolean resumeNever() {
        return resume.equals("never");
    }

    /** The checkpoint folder to continue from, or null when resume is auto or never. */
    public Path resumeFrom() {
        return resumeAuto() || resumeNever() ? null : Path.of(resume);
    }
}
