// A local filesystem that answers every request after a fixed latency: what an object store
// adds to a restart (tens of ms per request), for Spark restarts in bench_recovery_history.py.
// Scheme slow:///path maps to the local /path; no .crc files (as S3A writes none).
// The latency (ms) is the Hadoop conf fs.slow.latency.ms (default 30).
package statekit.bench;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.net.URI;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.hadoop.util.Progressable;

public class SlowFileSystem extends RawLocalFileSystem {
  private static final URI NAME = URI.create("slow:///");
  private long latencyMs = 30;

  @Override
  public void initialize(URI uri, Configuration conf) throws IOException {
    super.initialize(uri, conf);
    latencyMs = conf.getLong("fs.slow.latency.ms", 30);
  }

  @Override
  public URI getUri() { return NAME; }

  @Override
  public String getScheme() { return "slow"; }

  private void request() throws IOException {
    try {
      Thread.sleep(latencyMs);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new java.io.InterruptedIOException("interrupted");
    }
  }

  @Override
  public FSDataInputStream open(Path f, int bufferSize) throws IOException {
    request();
    return super.open(f, bufferSize);
  }

  @Override
  public FSDataOutputStream create(Path f, FsPermission permission, boolean overwrite,
      int bufferSize, short replication, long blockSize, Progressable progress)
      throws IOException {
    request();
    return super.create(f, permission, overwrite, bufferSize, replication, blockSize, progress);
  }

  @Override
  public FileStatus[] listStatus(Path f) throws IOException {
    request();
    return super.listStatus(f);
  }

  @Override
  public FileStatus getFileStatus(Path f) throws IOException {
    request();
    return super.getFileStatus(f);
  }

  @Override
  public boolean rename(Path src, Path dst) throws IOException {
    request();
    return super.rename(src, dst);
  }

  @Override
  public boolean delete(Path p, boolean recursive) throws IOException {
    request();
    return super.delete(p, recursive);
  }

  @Override
  public boolean mkdirs(Path f, FsPermission permission) throws IOException {
    request();
    return super.mkdirs(f, permission);
  }
}
