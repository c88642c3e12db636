//! A ClickHouse cluster on this machine, for tests and for trying the store out
//! (`causeway ch local-cluster`): Debian's `clickhouse-server` started as ordinary
//! processes on loopback, each with its own temporary directory and free ports, stopped
//! and removed on drop. Nothing is downloaded.
//!
//! `Cluster::start(n)` writes a config per node (free loopback ports, `remote_servers`
//! naming all of them as cluster `causeway`, a temporary directory), starts the servers,
//! waits for `/ping`, and kills them on drop. A node that exits while starting (a port found
//! free was taken before it bound it) makes it start the whole cluster again on other ports,
//! three times at most. `ClusterOptions` adds HTTPS (a test authority's certificate) or zstd
//! for parts (`<compression>` in the config; LZ4, ClickHouse's default, otherwise).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The cluster name in every node's `remote_servers`.
pub const CLUSTER: &str = "causeway";

/// One server of the cluster.
struct Node {
    child: Option<Child>,
    http_port: u16,
    /// Its HTTPS port, when the cluster serves HTTPS.
    https_port: Option<u16>,
    config: PathBuf,
}

/// Running ClickHouse servers, one shard each, that know each other as [`CLUSTER`].
pub struct Cluster {
    dir: PathBuf,
    binary: PathBuf,
    nodes: Vec<Node>,
}

fn free_port() -> Result<u16, String> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("finding a free loopback port: {e}"))
}

/// Writes `contents` to `path`, the error naming the file.
fn write(path: &Path, contents: &str) -> Result<(), String> {
    std::fs::write(path, contents).map_err(|e| format!("writing {}: {e}", path.display()))
}

fn create_dir(path: &Path) -> Result<(), String> {
    std::fs::create_dir_all(path).map_err(|e| format!("creating {}: {e}", path.display()))
}

fn binary() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("CAUSEWAY_CLICKHOUSE_SERVER") {
        return Ok(PathBuf::from(p));
    }
    for dir in std::env::var("PATH")
        .unwrap_or_default()
        .split(':')
        .chain(["/usr/sbin", "/usr/bin"])
    {
        let p = Path::new(dir).join("clickhouse-server");
        if p.is_file() {
            return Ok(p);
        }
    }
    Err(
        "a local cluster needs ClickHouse: install Debian's clickhouse-server package \
         (`apt-get install clickhouse-server`; .ci/run does), or set \
         CAUSEWAY_CLICKHOUSE_SERVER to a clickhouse-server binary"
            .into(),
    )
}

/// How a local cluster's servers are set up besides their ports.
#[derive(Debug, Clone, Copy, Default)]
pub struct ClusterOptions {
    /// Also serve HTTPS, with a certificate for `127.0.0.1` signed by the authority
    /// [`Cluster::https_url`] names.
    pub https: bool,
    /// Compress parts with zstd instead of ClickHouse's default LZ4: fewer bytes per
    /// span, slower reads.
    pub zstd: bool,
}

impl Cluster {
    /// Starts `shards` servers and waits until each answers.
    pub fn start(shards: usize) -> Cluster {
        Cluster::start_with(shards, ClusterOptions::default())
    }

    /// [`Cluster::start`], each node also serving HTTPS with a certificate for
    /// `127.0.0.1` signed by the authority [`Cluster::https_url`] names.
    pub fn start_with_https(shards: usize) -> Cluster {
        Cluster::start_with(
            shards,
            ClusterOptions {
                https: true,
                ..ClusterOptions::default()
            },
        )
    }

    /// [`Cluster::launch`], for tests: panics when the cluster does not start.
    pub fn start_with(shards: usize, options: ClusterOptions) -> Cluster {
        Cluster::launch(shards, options).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Starts the cluster on free ports; again on others when a node cannot start (a
    /// port found free may be taken before the node binds it, by another cluster or an
    /// outgoing connection). The error says why it did not start.
    pub fn launch(shards: usize, options: ClusterOptions) -> Result<Cluster, String> {
        let binary = binary()?;
        let mut failures = Vec::new();
        for _ in 0..3 {
            match Cluster::try_start_with(&binary, shards, options) {
                Ok(cluster) => return Ok(cluster),
                Err(e) => failures.push(e),
            }
        }
        Err(format!(
            "a local cluster did not start: {}",
            failures.join("; ")
        ))
    }

    fn try_start_with(
        binary: &Path,
        shards: usize,
        options: ClusterOptions,
    ) -> Result<Cluster, String> {
        let dir = std::env::temp_dir().join(format!(
            "causeway-clickhouse-{}-{}",
            std::process::id(),
            free_port()?
        ));
        let ports: Vec<(u16, u16, u16)> = (0..shards)
            .map(|_| Ok((free_port()?, free_port()?, free_port()?)))
            .collect::<Result<_, String>>()?;
        create_dir(&dir)?;
        write(&dir.join("ca.pem"), TLS_CA)?;
        let remote: String = ports
            .iter()
            .map(|(_, tcp, _)| {
                format!(
                    "<shard><replica><host>127.0.0.1</host><port>{tcp}</port></replica></shard>"
                )
            })
            .collect();
        let mut nodes = Vec::new();
        for (i, &(http, tcp, interserver)) in ports.iter().enumerate() {
            let home = dir.join(format!("node{i}"));
            create_dir(&home)?;
            let h = home.display();
            let config = home.join("config.xml");
            write(&home.join("users.xml"), USERS)?;
            let https_port = options.https.then(free_port).transpose()?;
            let https_config = match https_port {
                Some(port) => {
                    write(&home.join("server.pem"), TLS_CERTIFICATE)?;
                    write(&home.join("server.key"), TLS_KEY)?;
                    format!(
                        "<https_port>{port}</https_port><openSSL><server>\
                         <certificateFile>{h}/server.pem</certificateFile>\
                         <privateKeyFile>{h}/server.key</privateKeyFile>\
                         <verificationMode>none</verificationMode>\
                         <loadDefaultCAFile>false</loadDefaultCAFile>\
                         <disableProtocols>sslv2,sslv3</disableProtocols>\
                         </server></openSSL>"
                    )
                }
                None => String::new(),
            };
            let compression = if options.zstd {
                "<compression><case><method>zstd</method></case></compression>"
            } else {
                ""
            };
            write(
                &config,
                &format!(
                    r#"<?xml version="1.0"?>
<yandex>
  <logger><level>warning</level><log>{h}/server.log</log><errorlog>{h}/error.log</errorlog><size>10M</size><count>1</count></logger>
  <listen_host>127.0.0.1</listen_host>
  <http_port>{http}</http_port>
  <tcp_port>{tcp}</tcp_port>
  <interserver_http_port>{interserver}</interserver_http_port>
  <interserver_http_host>127.0.0.1</interserver_http_host>
  {https_config}
  <path>{h}/data/</path>
  <tmp_path>{h}/tmp/</tmp_path>
  <user_files_path>{h}/user_files/</user_files_path>
  <format_schema_path>{h}/format_schemas/</format_schema_path>
  <users_config>{h}/users.xml</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <mark_cache_size>268435456</mark_cache_size>
  <uncompressed_cache_size>268435456</uncompressed_cache_size>
  {compression}
  <remote_servers><{CLUSTER}>{remote}</{CLUSTER}></remote_servers>
</yandex>
"#
                ),
            )?;
            nodes.push(Node {
                child: None,
                http_port: http,
                https_port,
                config,
            });
        }
        let mut cluster = Cluster {
            dir,
            binary: binary.to_path_buf(),
            nodes,
        };
        for i in 0..cluster.nodes.len() {
            cluster.try_start_node(i)?;
        }
        Ok(cluster)
    }

    /// The store URL of the whole cluster, with its tables in `database`.
    pub fn url(&self, database: &str) -> String {
        let nodes: Vec<String> = self
            .nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.http_port))
            .collect();
        format!(
            "clickhouse://{}/{database}?cluster={CLUSTER}",
            nodes.join(",")
        )
    }

    /// The HTTPS store URL of the whole cluster (started by [`Cluster::start_with_https`]),
    /// trusting the authority that signed the nodes' certificate.
    pub fn https_url(&self, database: &str) -> String {
        let nodes: Vec<String> = self
            .nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.https_port.expect("a node serving HTTPS")))
            .collect();
        format!(
            "clickhouses://{}/{database}?cluster={CLUSTER}&ca={}",
            nodes.join(","),
            self.dir.join("ca.pem").display()
        )
    }

    /// The store URL of node `i` alone, as a single server.
    pub fn node_url(&self, i: usize, database: &str) -> String {
        format!(
            "clickhouse://127.0.0.1:{}/{database}",
            self.nodes[i].http_port
        )
    }

    /// Kills node `i` (as `kill -9`).
    pub fn kill_node(&mut self, i: usize) {
        if let Some(mut child) = self.nodes[i].child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts node `i` (again) and waits until it answers.
    pub fn start_node(&mut self, i: usize) {
        if let Err(e) = self.try_start_node(i) {
            panic!("{e}");
        }
    }

    fn try_start_node(&mut self, i: usize) -> Result<(), String> {
        let node = &mut self.nodes[i];
        let child = Command::new(&self.binary)
            .arg(format!("--config-file={}", node.config.display()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("starting {}: {e}", self.binary.display()))?;
        node.child = Some(child);
        let port = node.http_port;
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if ping(port) {
                return Ok(());
            }
            if let Some(status) = node
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                // Its directory goes with the cluster: the error's last line now.
                let log = std::fs::read_to_string(node.config.with_file_name("error.log"))
                    .unwrap_or_default();
                let last = log.lines().last().unwrap_or("(no error.log)");
                return Err(format!(
                    "clickhouse-server node {i} exited ({status}): {last}"
                ));
            }
            if Instant::now() >= deadline {
                return Err(format!("clickhouse-server node {i} did not answer in 60 s"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

fn ping(port: u16) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    if s.write_all(b"GET /ping HTTP/1.0\r\n\r\n").is_err() {
        return false;
    }
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    answer.starts_with("HTTP/1.0 200") || answer.starts_with("HTTP/1.1 200")
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for i in 0..self.nodes.len() {
            self.kill_node(i);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

// A test authority and the certificate it signed for 127.0.0.1 (see testdata/tls).
const TLS_CA: &str = include_str!("../testdata/tls/ca.pem");
const TLS_CERTIFICATE: &str = include_str!("../testdata/tls/server.pem");
const TLS_KEY: &str = include_str!("../testdata/tls/server.key");

const USERS: &str = r#"<?xml version="1.0"?>
<yandex>
  <profiles><default><max_memory_usage>4000000000</max_memory_usage></default><readonly><readonly>1</readonly></readonly></profiles>
  <users>
    <default><password></password><networks><ip>127.0.0.1</ip><ip>::1</ip></networks><profile>default</profile><quota>default</quota></default>
  </users>
  <quotas><default><interval><duration>3600</duration><queries>0</queries><errors>0</errors><result_rows>0</result_rows><read_rows>0</read_rows><execution_time>0</execution_time></interval></default></quotas>
</yandex>
"#;
