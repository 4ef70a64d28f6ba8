// CommandArgs.java — the command's arguments as the user typed them. The JVM decodes its argv by
// the locale's charset (sun.jnu.encoding), and under LANG=C, POSIX or no locale at all (most
// containers) that is ASCII: every other character of a text to tokenize, a prompt, a stop string
// or a path arrives as U+FFFD, and tokenize and generate would work on other text without a word.
// On Linux the bytes themselves are in /proc/self/cmdline; where the charset lost some, they are
// decoded again as UTF-8, and where that cannot be done the command stops saying why.
package dev.drmas.cli;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.Charset;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

final class CommandArgs {
    private CommandArgs() {
    }

    /**
     * {@code args} as main received them, or, where the JVM's charset turned some bytes into U+FFFD,
     * the same arguments decoded from their bytes as UTF-8.
     *
     * @throws UserError when an argument cannot be recovered
     */
    static String[] recover(String[] args) {
        Charset jnu;
        try {
            jnu = Charset.forName(System.getProperty("sun.jnu.encoding", "UTF-8"));
        } catch (IllegalArgumentException e) {
            return args;
        }
        if (jnu.equals(StandardCharsets.UTF_8) || Arrays.stream(args).noneMatch(a -> a.indexOf('\uFFFD') >= 0)) return args;
        byte[] cmdline;
        try {
            cmdline = Files.readAllBytes(Path.of("/proc/self/cmdline"));
        } catch (IOException | UnsupportedOperationException | SecurityException e) {
            cmdline = new byte[0];
        }
        return recover(args, jnu, cmdline);
    }

    /**
     * {@code args} decoded as UTF-8 from the last entries of {@code cmdline} (the process's argv,
     * each entry ended by a NUL), after checking that {@code jnu} decodes each entry to the argument
     * the JVM gave (the same arguments, not those of an @argfile).
     */
    static String[] recover(String[] args, Charset jnu, byte[] cmdline) {
        List<byte[]> argv = new ArrayList<>();
        for (int start = 0, i = 0; i < cmdline.length; i++) {
            if (cmdline[i] == 0) {
                argv.add(Arrays.copyOfRange(cmdline, start, i));
                start = i + 1;
            }
        }
        int offset = argv.size() - args.length;
        String[] typed = new String[args.length];
        for (int i = 0; i < args.length; i++) {
            typed[i] = args[i];
            if (args[i].indexOf('\uFFFD') < 0) continue;
            byte[] raw = offset >= 0 ? argv.get(offset + i) : null;
            if (raw != null && new String(raw, jnu).equals(args[i])) {
                try {
                    typed[i] = StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
                            .onUnmappableCharacter(CodingErrorAction.REPORT).decode(ByteBuffer.wrap(raw)).toString();
                    continue;
                } catch (CharacterCodingException e) {
                    // neither the locale's charset nor UTF-8: say so below
                }
            }
            throw new UserError("argument " + (i + 1) + " '" + args[i] + "' has characters that the locale's charset ("
                    + jnu + ") cannot represent and that are not UTF-8 either; run drmas in a UTF-8 locale, e.g. with LC_ALL=C.UTF-8");
        }
        return typed;
    }
}
