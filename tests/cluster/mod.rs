//! A MariaDB Galera cluster on loopback for tests: N `mariadbd` processes from the machine's
//! server binary, each with its own data directory under one temporary directory and its own
//! client, group-communication (gcomm), IST and SST ports. Node 1 is initialised with
//! `mariadb-install-db` and bootstraps the cluster (`--wsrep-new-cluster`); the others join it one
//! at a time and receive node 1's data by state transfer (rsync SST), so they start from an empty
//! data directory (anything `mariadb-install-db` put there would be replaced by the transfer).
//!
//! Needs `mariadbd`, `mariadb-install-db`, the Galera provider (`/usr/lib/galera/libgalera_smm.so`,
//! or `ORBIT_GALERA_PROVIDER`) and `rsync`. Every node is SIGKILLed when the cluster is dropped.

#![allow(dead_code)]

use std::collections::BTreeSet;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sqlx::{Connection, MySqlConnection};

/// The Galera provider library.
pub fn provider() -> PathBuf {
    std::env::var_os("ORBIT_GALERA_PROVIDER")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/lib/galera/libgalera_smm.so"))
}

/// Group-communication timeouts (Galera's `evs.*` provider options): how fast the survivors
/// notice a dead member and form a new primary component. Galera's defaults (suspect after 5 s,
/// evict after 15 s) suit real networks; the test keeps them unless `ORBIT_GALERA_EVS` is set,
/// e.g. `evs.suspect_timeout=PT2S;evs.inactive_timeout=PT3S`.
fn evs_options() -> String {
    std::env::var("ORBIT_GALERA_EVS").unwrap_or_default()
}

/// One `mariadbd` of the cluster.
pub struct Node {
    /// 1-based, as in the server logs (`n1`, `n2`, …).
    pub index: usize,
    /// The client port.
    pub port: u16,
    pub gcomm_port: u16,
    pub ist_port: u16,
    pub sst_port: u16,
    pub dir: PathBuf,
    child: Option<Child>,
}

impl Node {
    pub fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    pub fn log(&self) -> PathBuf {
        self.dir.join("mysqld.log")
    }

    /// `mysql://root@127.0.0.1:PORT` (no database).
    pub fn server_dsn(&self) -> String {
        format!("mysql://root@127.0.0.1:{}", self.port)
    }

    pub fn dsn(&self, database: &str) -> String {
        format!("{}/{database}", self.server_dsn())
    }

    pub fn running(&self) -> bool {
        self.child.is_some()
    }

    /// The last lines of the server log, for failure messages.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(self.log()).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }
}

/// A running cluster; its nodes are SIGKILLed and its directory removed when dropped.
pub struct Cluster {
    pub nodes: Vec<Node>,
    dir: tempfile::TempDir,
}

/// A free loopback port that this process has not handed out before. The listener that found it
/// is closed at once, so the kernel may offer the same port again: one cluster's node 3 once got
/// node 1's gcomm port as its SST receive port, and its rsync daemon could not start.
fn free_port() -> u16 {
    static GIVEN: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());
    loop {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free loopback port")
            .port();
        if GIVEN.lock().expect("the ports handed out").insert(port) {
            return port;
        }
    }
}

/// The uid the rsync daemon of an SST runs as when started by root (rsync's default `nobody`).
fn nobody() -> (u32, u32) {
    let id = |flag: &str| {
        Command::new("id")
            .args([flag, "nobody"])
            .output()
            .ok()
            .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
            .unwrap_or(65534)
    };
    (id("-u"), id("-g"))
}

/// Whether this machine can run the cluster; the reason when not.
pub fn available() -> Result<(), String> {
    for tool in ["mariadbd", "mariadb-install-db", "rsync", "wsrep_sst_rsync"] {
        if orbit::dev::find_binary(&[tool]).is_none() {
            return Err(format!("{tool} is not installed"));
        }
    }
    if !provider().is_file() {
        return Err(format!(
            "the Galera provider {} is missing (apt-get install galera-4)",
            provider().display()
        ));
    }
    Ok(())
}

impl Cluster {
    /// Starts an `n`-node cluster and waits until every node is synced and
    /// `wsrep_cluster_size = n`.
    pub async fn start(n: usize) -> Cluster {
        available().unwrap_or_else(|e| panic!("cannot run a Galera cluster here: {e}"));
        let dir = tempfile::Builder::new()
            .prefix("orbit-galera-")
            .tempdir()
            .expect("temporary directory");
        let root = orbit::dev::running_as_root();
        if root {
            // The SST's rsync daemon drops to `nobody`: it must reach the joiners' directories.
            set_mode(dir.path(), 0o755);
        }
        let mut nodes: Vec<Node> = (1..=n)
            .map(|index| {
                let node_dir = dir.path().join(format!("n{index}"));
                std::fs::create_dir_all(node_dir.join("data")).expect("node directory");
                set_mode(&node_dir, 0o755);
                Node {
                    index,
                    port: free_port(),
                    gcomm_port: free_port(),
                    ist_port: free_port(),
                    sst_port: free_port(),
                    dir: node_dir,
                    child: None,
                }
            })
            .collect();
        orbit::dev::initialise_data_dir(&nodes[0].data()).expect("initialise node 1");
        for node in &nodes[1..] {
            if root {
                let (uid, gid) = nobody();
                std::os::unix::fs::chown(node.data(), Some(uid), Some(gid))
                    .expect("chown the joiner's data directory");
            }
        }
        let mut cluster = Cluster {
            nodes: Vec::new(),
            dir,
        };
        let addresses = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.gcomm_port))
            .collect::<Vec<_>>()
            .join(",");
        for (i, node) in nodes.iter_mut().enumerate() {
            let started = Instant::now();
            node.child = Some(spawn(node, &addresses, i == 0, root));
            wait_ready(node, Duration::from_secs(120)).await;
            eprintln!(
                "galera: node {} ready on port {} after {:.1} s",
                node.index,
                node.port,
                started.elapsed().as_secs_f64()
            );
        }
        cluster.nodes = nodes;
        cluster.wait_size(0, n, Duration::from_secs(60)).await;
        cluster
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Comma-separated DSNs of every node (in node order) for `database`.
    pub fn dsn_list(&self, database: &str) -> String {
        self.nodes
            .iter()
            .map(|n| n.dsn(database))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// SIGKILLs node `i` (0-based), like a crash.
    pub fn kill(&mut self, i: usize) {
        if let Some(mut child) = self.nodes[i].child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Waits until node `via` (0-based) reports `wsrep_cluster_size = size` and is ready.
    pub async fn wait_size(&self, via: usize, size: usize, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            let last = match status(&self.nodes[via].server_dsn()).await {
                Ok((cluster_size, ready)) if cluster_size == size && ready => return,
                Ok((cluster_size, ready)) => {
                    format!("wsrep_cluster_size={cluster_size} wsrep_ready={ready}")
                }
                Err(e) => e,
            };
            assert!(
                Instant::now() < deadline,
                "node {} did not reach cluster size {size} within {timeout:?} ({last}); log:\n{}",
                via + 1,
                self.nodes[via].log_tail(30)
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for i in 0..self.nodes.len() {
            self.kill(i);
        }
        if std::env::var_os("ORBIT_GALERA_KEEP").is_some() {
            let kept = std::mem::replace(&mut self.dir, tempfile::tempdir().expect("tempdir"));
            eprintln!("galera: kept {}", kept.keep().display());
        }
    }
}

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .expect("set directory permissions");
}

/// The `mariadbd` command line of a node: no option files, the settings Galera needs
/// (`binlog_format=ROW`, `innodb_autoinc_lock_mode=2`, InnoDB), and the node's own ports.
fn spawn(node: &Node, addresses: &str, bootstrap: bool, root: bool) -> Child {
    let server = orbit::dev::find_binary(&["mariadbd"]).expect("mariadbd");
    let mut provider_options = format!(
        "gmcast.listen_addr=tcp://127.0.0.1:{};ist.recv_addr=127.0.0.1:{};gcache.size=64M",
        node.gcomm_port, node.ist_port
    );
    let evs = evs_options();
    if !evs.is_empty() {
        provider_options.push(';');
        provider_options.push_str(&evs);
    }
    // A tmpdir of its own: a starting server deletes every `#sql*` file in its tmpdir, and in a
    // shared /tmp those are other servers' temporary tables in use.
    let tmp = node.dir.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let mut cmd = Command::new(server);
    cmd.arg("--no-defaults")
        .arg(format!("--datadir={}", node.data().display()))
        .arg(format!("--tmpdir={}", tmp.display()))
        .arg(format!("--port={}", node.port))
        .arg("--bind-address=127.0.0.1")
        .arg(format!(
            "--socket={}",
            node.dir.join("mysqld.sock").display()
        ))
        .arg(format!(
            "--pid-file={}",
            node.dir.join("mysqld.pid").display()
        ))
        .arg(format!("--log-error={}", node.log().display()))
        .arg("--skip-name-resolve")
        .arg("--character-set-server=utf8mb4")
        .arg("--binlog-format=ROW")
        .arg("--innodb-autoinc-lock-mode=2")
        .arg("--default-storage-engine=InnoDB")
        .arg("--wsrep-on=ON")
        .arg(format!("--wsrep-provider={}", provider().display()))
        .arg("--wsrep-cluster-name=orbit-test")
        .arg(format!("--wsrep-cluster-address=gcomm://{addresses}"))
        .arg(format!("--wsrep-node-name=n{}", node.index))
        .arg(format!(
            "--wsrep-node-address=127.0.0.1:{}",
            node.gcomm_port
        ))
        .arg(format!("--wsrep-provider-options={provider_options}"))
        .arg("--wsrep-sst-method=rsync")
        .arg(format!(
            "--wsrep-sst-receive-address=127.0.0.1:{}",
            node.sst_port
        ));
    if bootstrap {
        cmd.arg("--wsrep-new-cluster");
    }
    if root {
        cmd.arg("--user=root");
    }
    cmd.stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start mariadbd")
}

/// (`wsrep_cluster_size`, `wsrep_ready = ON`) of a node.
async fn status(server_dsn: &str) -> Result<(usize, bool), String> {
    let mut conn = MySqlConnection::connect(server_dsn)
        .await
        .map_err(|e| e.to_string())?;
    let rows: Vec<(String, String)> = sqlx::query_as(
        "SHOW GLOBAL STATUS WHERE Variable_name IN ('wsrep_cluster_size', 'wsrep_ready')",
    )
    .fetch_all(&mut conn)
    .await
    .map_err(|e| e.to_string())?;
    let _ = conn.close().await;
    let get = |name: &str| {
        rows.iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    Ok((
        get("wsrep_cluster_size").parse().unwrap_or(0),
        get("wsrep_ready").eq_ignore_ascii_case("ON"),
    ))
}

async fn wait_ready(node: &mut Node, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    loop {
        if let Ok((_, true)) = status(&node.server_dsn()).await {
            return;
        }
        if let Some(Ok(Some(exit))) = node.child.as_mut().map(|c| c.try_wait()) {
            panic!(
                "node {} exited ({exit}) while starting; log:\n{}",
                node.index,
                node.log_tail(40)
            );
        }
        assert!(
            Instant::now() < deadline,
            "node {} was not ready within {timeout:?}; log:\n{}",
            node.index,
            node.log_tail(40)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
