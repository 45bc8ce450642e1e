import java.net.InetAddress;
import java.net.InetSocketAddress;

import org.apache.hadoop.hive.conf.HiveConf;
import org.apache.hadoop.hive.metastore.HiveMetaStore;
import org.apache.hadoop.hive.metastore.IHMSHandler;
import org.apache.hadoop.hive.metastore.TSetIpAddressProcessor;
import org.apache.hadoop.hive.metastore.txn.TxnDbUtil;
import org.apache.hadoop.hive.ql.txn.AcidHouseKeeperService;
import org.apache.thrift.protocol.TBinaryProtocol;
import org.apache.thrift.server.TServer;
import org.apache.thrift.server.TThreadPoolServer;
import org.apache.thrift.transport.TServerSocket;
import org.apache.thrift.transport.TTransportFactory;

/**
 * A Hive 2.3 metastore (the one in the pyspark wheel) on embedded Derby, serving Thrift on
 * 127.0.0.1 only. HiveMetaStore.startMetaStore binds every interface, so the server is assembled
 * here as startMetaStore assembles it (no SASL, binary protocol).
 *
 * <p>Usage: HiveMetastoreLauncher PORT DERBY_DIR WAREHOUSE_URI (PORT 0: any free port). Prints
 * "icesql-hive-metastore: serving on 127.0.0.1:PORT" once it accepts calls.
 */
public final class HiveMetastoreLauncher {
  public static void main(String[] args) throws Exception {
    HiveConf conf = new HiveConf();
    conf.set("javax.jdo.option.ConnectionURL",
        "jdbc:derby:;databaseName=" + args[1] + "/metastore_db;create=true");
    conf.set("hive.metastore.warehouse.dir", args[2]);
    conf.set("datanucleus.schema.autoCreateAll", "true");
    conf.set("hive.metastore.schema.verification", "false");
    conf.set("datanucleus.connectionPoolingType", "HikariCP"); // pyspark 4 ships no BoneCP
    conf.set("hive.metastore.disallow.incompatible.col.type.changes", "false");
    // Iceberg commits call lock/check_lock/unlock: they need the transaction tables.
    TxnDbUtil.setConfValues(conf);
    // A lock whose holder died (a writer SIGKILLed inside its commit) is dropped by the metastore's
    // housekeeper once it has not been heartbeated for hive.txn.timeout (300 s by default, the
    // reaper starting after 100 s and running every 180 s); here within about 10 s, so that the
    // kill tests' next run is not held up for minutes.
    conf.set("hive.txn.timeout", "8s");
    conf.set("hive.timedout.txn.reaper.start", "1s");
    conf.set("hive.timedout.txn.reaper.interval", "2s");
    TxnDbUtil.prepDb(conf);

    new AcidHouseKeeperService().start(conf); // startMetaStore starts it too

    IHMSHandler handler = HiveMetaStore.newRetryingHMSHandler(
        new HiveMetaStore.HMSHandler("icesql test metastore", conf, false), conf);
    TServerSocket socket = new TServerSocket(
        new InetSocketAddress(InetAddress.getLoopbackAddress(), Integer.parseInt(args[0])));
    TServer server = new TThreadPoolServer(new TThreadPoolServer.Args(socket)
        .processor(new TSetIpAddressProcessor<>(handler))
        .transportFactory(new TTransportFactory())
        .protocolFactory(new TBinaryProtocol.Factory())
        .minWorkerThreads(2)
        .maxWorkerThreads(64));
    int port = socket.getServerSocket().getLocalPort();
    System.out.println("icesql-hive-metastore: serving on 127.0.0.1:" + port);
    System.out.flush();
    server.serve();
  }
}
