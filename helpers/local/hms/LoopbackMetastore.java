// The local Hive Metastore service on one address (helpers.local.metastore).
//
// Why this file exists: Hive's own launcher (HiveMetaStore.main) in 3.1.x, the line whose Thrift
// calls Spark 3.5's Hive 2.3 client and Hudi's Hive sync use, listens on every interface: it passes
// no host to its server socket and has no setting for one (metastore.thrift.bind.host arrived in
// Hive 4, which drops the get_table call those clients make). The workbook's servers listen on
// 127.0.0.1 only, so this launcher serves the same handler stack as HiveMetaStore.main does
// (HMSHandler behind RetryingHMSHandler, behind TSetIpAddressProcessor, on Thrift's thread-pool
// server with the binary protocol and the worker thread bounds of metastore-site.xml) on the
// address it is given. It skips what a local catalog does not use: SASL/Kerberos, SSL, the
// compactor and the housekeeping threads. Compiled by javac into the git-ignored .cache/metastore/
// on first use (LocalMetastore), so nothing compiled is committed.
//
// Usage: java -cp <compiled folder>:<metastore-site.xml's folder>:<Hive Metastore 3.1 lib>/*:... LoopbackMetastore HOST PORT

import java.net.InetSocketAddress;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hive.metastore.HiveMetaStore;
import org.apache.hadoop.hive.metastore.IHMSHandler;
import org.apache.hadoop.hive.metastore.RetryingHMSHandler;
import org.apache.hadoop.hive.metastore.TSetIpAddressProcessor;
import org.apache.hadoop.hive.metastore.conf.MetastoreConf;
import org.apache.thrift.protocol.TBinaryProtocol;
import org.apache.thrift.server.TThreadPoolServer;
import org.apache.thrift.transport.TServerSocket;
import org.apache.thrift.transport.TTransportFactory;

public final class LoopbackMetastore {
  private LoopbackMetastore() {}

  public static void main(String[] args) {
    if (args.length != 2) {
      System.err.println("usage: LoopbackMetastore HOST PORT");
      System.exit(2);
    }
    try {
      serve(args[0], Integer.parseInt(args[1]));
    } catch (Throwable e) {  // a failed start ends the process (the handler's threads would keep it)
      e.printStackTrace();
      System.exit(1);
    }
  }

  private static void serve(String host, int port) throws Exception {
    Configuration conf = MetastoreConf.newMetastoreConf();  // metastore-site.xml from the class path
    IHMSHandler handler = RetryingHMSHandler.getProxy(
        conf, new HiveMetaStore.HMSHandler("workbook metastore", conf, false), false);
    TServerSocket socket = new TServerSocket(new InetSocketAddress(host, port));
    TThreadPoolServer.Args serverArgs = new TThreadPoolServer.Args(socket)
        .processor(new TSetIpAddressProcessor<>(handler))
        .transportFactory(new TTransportFactory())
        .protocolFactory(new TBinaryProtocol.Factory())
        .minWorkerThreads(MetastoreConf.getIntVar(conf, MetastoreConf.ConfVars.SERVER_MIN_THREADS))
        .maxWorkerThreads(MetastoreConf.getIntVar(conf, MetastoreConf.ConfVars.SERVER_MAX_THREADS));
    System.out.println("Hive Metastore serving on " + host + ":" + port);
    new TThreadPoolServer(serverArgs).serve();
  }
}
