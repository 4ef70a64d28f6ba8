// HelpTest.java — `drmas --help` lists every command with its description whole (picocli showed only
// each description's first line, cutting most of them mid-sentence), wrapped between words within
// the usage width (picocli's wrapping broke "config.json" after its dot).
package dev.drmas.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.junit.jupiter.api.Test;

class HelpTest {
    @Test
    void everyCommandsDescriptionIsShownWhole() {
        Cli.Run r = Cli.run("--help");
        assertEquals(0, r.exit(), r.err());
        String out = r.out();
        int width = Main.commandLine().getCommandSpec().usageMessage().width();
        String list = out.substring(out.indexOf("Commands:"));
        for (String line : list.lines().toList()) assertTrue(line.length() <= width, "longer than " + width + ": '" + line + "'");
        // the list's text with its line breaks and indents as single spaces: each description whole, words unbroken
        String flat = list.replaceAll("\\s+", " ");
        var subs = Main.commandLine().getSubcommands();
        for (var e : subs.entrySet()) {
            var usage = e.getValue().getCommandSpec().usageMessage();  // picocli's help command has a header
            String whole = String.join(" ", usage.header().length > 0 ? usage.header() : usage.description())
                    .replaceAll("\\s+", " ").strip();
            assertTrue(flat.contains(" " + e.getKey() + " " + whole), "'" + e.getKey() + " " + whole + "' in:\n" + list);
        }
        // the second lines that were cut
        for (String tail : List.of("the NVIDIA driver, whether CUDA is available", "Re-running continues the run; --fresh starts over.",
                "Exit status: 0 when it fits, 2 when it does not, 1 for bad input.")) {
            assertTrue(flat.contains(tail), "'" + tail + "' in:\n" + list);
        }
    }
}
