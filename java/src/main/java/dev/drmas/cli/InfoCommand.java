// InfoCommand.java — `drmas info`: the libdrmas build and backend in use, for bug reports
// and for checking a GPU server's setup.
package dev.drmas.cli;

import dev.drmas.bindings.Backend;
import dev.drmas.bindings.LibDrmas;
import dev.drmas.bindings.NativeLibrary;
import picocli.CommandLine.Command;

@Command(name = "info", description = "Print the libdrmas build, its path and the kernel backend in use.")
final class InfoCommand implements Runnable {
    @Override
    public void run() {
        System.out.println("libdrmas " + LibDrmas.version() + " at " + NativeLibrary.get().path());
        System.out.println("CUDA compiled: " + LibDrmas.cudaCompiled() + ", device available: " + LibDrmas.cudaAvailable());
        System.out.println("backend: " + Backend.selected() + " (override with -D" + Backend.PROPERTY + "=cpu|cuda|auto)");
        System.out.println("CPU threads: " + LibDrmas.numThreads() + " (set OMP_NUM_THREADS to change)");
    }
}
