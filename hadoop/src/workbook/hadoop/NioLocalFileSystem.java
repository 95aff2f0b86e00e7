package workbook.hadoop;

import java.io.File;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;

import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;

/**
 * Hadoop's local file system ({@code file:}), with its checksums, that sets a file's permissions
 * in the JVM instead of starting a {@code chmod} process for every file and folder it creates.
 *
 * <p>Why this exists: without Hadoop's native library ({@code libhadoop.so}), Hadoop 3.3's
 * {@link RawLocalFileSystem#setPermission} runs {@code chmod} as a child process, and its
 * {@code LocalFileSystem} calls it for each file it creates with a permission (every create
 * through {@code FileSystem.create(Path, boolean)}, which Hudi and Parquet use, and each
 * {@code .crc} beside it) and for each new folder: 15 for a one-row commit to a copy-on-write Hudi
 * table, 1,655-1,712 in one short conformance set of the workbook. A create took 5.8-6.5 ms that
 * way, 1.3-1.7 ms with this class, and the short set 87.0-91.6 s against 91.0-95.1 s
 * (bench/README.md, "One chmod process per file").
 * The native library is not published on Maven Central or in Debian, and pyspark does not ship
 * it; no Hadoop setting avoids the process. So this subclass overrides the one method, with
 * {@link Files#setPosixFilePermissions}, the system call {@code chmod} makes.
 *
 * <p>A mode with the sticky bit, which Java's file API cannot set, still goes to Hadoop's own
 * {@code chmod}. {@code FileContext} (Spark Structured Streaming's checkpoints) does not use
 * {@code fs.file.impl}: {@link NioLocalFs} is this class for it. The workbook sets both on its
 * local Spark sessions only ({@code helpers.spark.LOCAL_FILE_SYSTEMS}); clusters keep their own
 * file systems.
 */
public class NioLocalFileSystem extends LocalFileSystem {

    public NioLocalFileSystem() {
        super(new Raw());
    }

    /** The raw (checksum-less) local file system under {@link NioLocalFileSystem}. */
    public static class Raw extends RawLocalFileSystem {

        @Override
        public void setPermission(Path p, FsPermission permission) throws IOException {
            short mode = permission.toShort();
            if ((mode & ~0777) != 0) {  // the sticky bit: not in PosixFilePermission
                super.setPermission(p, permission);
                return;
            }
            File file = pathToFile(p);
            Files.setPosixFilePermissions(file.toPath(), permissions(mode));
        }
    }

    /** The permissions of a mode's nine rwx bits. */
    static Set<PosixFilePermission> permissions(int mode) {
        Set<PosixFilePermission> set = EnumSet.noneOf(PosixFilePermission.class);
        PosixFilePermission[] bits = {
            PosixFilePermission.OTHERS_EXECUTE, PosixFilePermission.OTHERS_WRITE, PosixFilePermission.OTHERS_READ,
            PosixFilePermission.GROUP_EXECUTE, PosixFilePermission.GROUP_WRITE, PosixFilePermission.GROUP_READ,
            PosixFilePermission.OWNER_EXECUTE, PosixFilePermission.OWNER_WRITE, PosixFilePermission.OWNER_READ,
        };
        for (int i = 0; i < bits.length; i++) {
            if ((mode & (1 << i)) != 0) {
                set.add(bits[i]);
            }
        }
        return set;
    }
}
