package workbook.hadoop;

import java.io.IOException;
import java.net.URI;
import java.net.URISyntaxException;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.ChecksumFs;
import org.apache.hadoop.fs.DelegateToFileSystem;
import org.apache.hadoop.fs.FsConstants;
import org.apache.hadoop.fs.FsServerDefaults;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.local.LocalConfigKeys;

/**
 * {@link NioLocalFileSystem} for Hadoop's {@code FileContext} API: what Hadoop's
 * {@code org.apache.hadoop.fs.local.LocalFs} is to its {@code LocalFileSystem}, the same
 * checksums, over {@link NioLocalFileSystem.Raw} instead of Hadoop's raw local file system.
 *
 * <p>Why this exists: {@code FileContext} does not go through {@code fs.file.impl}; it builds its
 * own file system from {@code fs.AbstractFileSystem.file.impl}, and Hadoop's builds Hadoop's raw
 * local file system, which starts a {@code chmod} process for every file and folder it creates
 * (see {@link NioLocalFileSystem}). Spark Structured Streaming writes its checkpoints (offsets,
 * commits, state) through {@code FileContext}, so the local-kafka profile's Bronze sink started a
 * process for each of those files. Hadoop's {@code LocalFs} and {@code RawLocalFs} take no other
 * file system (their constructors are package-private), so this class builds the same pair over
 * the workbook's raw file system, with {@code RawLocalFs}'s overrides (port, server defaults,
 * valid names). One difference: it is not an {@code instanceof LocalFs}, so Spark's
 * {@code AbstractFileContextBasedCheckpointFileManager.isLocal()} answers false; nothing in Spark
 * 3.5's SQL module (nor Delta's) asks it.
 *
 * <p>The workbook sets it as {@code fs.AbstractFileSystem.file.impl} of its local Spark sessions
 * only, beside {@code fs.file.impl} ({@code helpers.spark.LOCAL_FILE_SYSTEMS}).
 */
public class NioLocalFs extends ChecksumFs {

    /** As Hadoop's {@code LocalFs}: the URI given is not used, every instance is {@code file:///}. */
    public NioLocalFs(URI uri, Configuration conf) throws IOException, URISyntaxException {
        super(new Raw(FsConstants.LOCAL_FS_URI, conf));
    }

    /** The checksum-less layer: {@code FileContext}'s calls delegated to {@link NioLocalFileSystem.Raw}. */
    public static class Raw extends DelegateToFileSystem {

        public Raw(URI uri, Configuration conf) throws IOException, URISyntaxException {
            super(uri, new NioLocalFileSystem.Raw(), conf, FsConstants.LOCAL_FS_URI.getScheme(), false);
        }

        @Override
        public int getUriDefaultPort() {
            return -1;  // file: URIs have no port
        }

        @Override
        public FsServerDefaults getServerDefaults(Path f) throws IOException {
            return LocalConfigKeys.getServerDefaults();
        }

        @Override
        @Deprecated
        public FsServerDefaults getServerDefaults() throws IOException {
            return LocalConfigKeys.getServerDefaults();
        }

        @Override
        public boolean isValidName(String src) {
            return true;  // any local path name, as Hadoop's RawLocalFs allows
        }
    }
}
