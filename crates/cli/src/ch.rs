//! `causeway ch`: the ClickHouse store's administration.

use anyhow::{Context, Result};
use causeway_clickhouse::http::Client;
use causeway_clickhouse::{schema, Endpoint};
use clap::{Args, Subcommand};
use std::time::Duration;

/// What `causeway ch` does.
#[derive(Subcommand)]
pub enum ChCommand {
    /// Create or upgrade Causeway's tables on every node the store URL lists (versioned;
    /// running it again changes nothing).
    Migrate(MigrateArgs),
    /// Start a ClickHouse cluster on this machine for trying the store out: one
    /// clickhouse-server (Debian's) per shard on free loopback ports, in a temporary
    /// directory; prints its store URL, and stops and removes it on Ctrl-C.
    LocalCluster(LocalClusterArgs),
}

/// `causeway ch local-cluster`.
#[derive(Args)]
pub struct LocalClusterArgs {
    /// Shards (one server each).
    #[arg(long, default_value_t = 2)]
    shards: usize,
    /// The database in the printed URL.
    #[arg(long, default_value = causeway_clickhouse::endpoint::DEFAULT_DATABASE)]
    database: String,
    /// Also serve HTTPS, with a test certificate for 127.0.0.1, and print that URL (its
    /// `ca=` names the test authority) instead.
    #[arg(long)]
    https: bool,
    /// Compress the servers' parts with zstd instead of LZ4: about a quarter fewer bytes
    /// per span, slower reads (BENCHMARKS.md has both).
    #[arg(long)]
    zstd: bool,
}

/// A ClickHouse store and how to sign in to it.
#[derive(Args, Clone)]
pub struct ClickHouseStoreArgs {
    /// The ClickHouse store: clickhouse://HOST:PORT[,HOST:PORT...]/DATABASE?cluster=NAME,
    /// one node per shard (https:// or clickhouses:// for TLS).
    #[arg(long, value_name = "URL")]
    pub store: Option<String>,
    /// ClickHouse user (instead of the URL's).
    #[arg(long, env = "CAUSEWAY_STORE_USER")]
    pub store_user: Option<String>,
    /// ClickHouse password (instead of the URL's).
    #[arg(long, env = "CAUSEWAY_STORE_PASSWORD", hide_env_values = true)]
    pub store_password: Option<String>,
}

impl ClickHouseStoreArgs {
    /// The endpoint, the flags' user and password over the URL's; none without --store.
    pub fn endpoint(&self) -> Result<Option<Endpoint>> {
        let Some(url) = &self.store else {
            return Ok(None);
        };
        let mut e = Endpoint::parse(url)?;
        if let Some(user) = &self.store_user {
            e.user = Some(user.clone());
        }
        if let Some(password) = &self.store_password {
            e.password = Some(password.clone());
        }
        Ok(Some(e))
    }
}

impl ClickHouseStoreArgs {
    /// The server's ClickHouse configuration; none without --store.
    pub fn server_config(
        &self,
        spool_max_bytes: u64,
    ) -> Result<Option<causeway_server::ClickHouseConfig>> {
        Ok(self
            .endpoint()?
            .map(|endpoint| causeway_server::ClickHouseConfig {
                endpoint,
                options: causeway_clickhouse::ClickHouseOptions::default(),
                spool: causeway_clickhouse::SpoolOptions {
                    max_unshipped_bytes: spool_max_bytes,
                    ..causeway_clickhouse::SpoolOptions::default()
                },
            }))
    }
}

/// `causeway ch migrate`.
#[derive(Args)]
pub struct MigrateArgs {
    #[command(flatten)]
    store: ClickHouseStoreArgs,
    /// Print what was done as JSON.
    #[arg(long)]
    json: bool,
}

/// Runs a `causeway ch` command.
pub fn run(command: ChCommand) -> Result<()> {
    match command {
        ChCommand::Migrate(a) => migrate(a),
        ChCommand::LocalCluster(a) => local_cluster(a),
    }
}

fn local_cluster(a: LocalClusterArgs) -> Result<()> {
    if a.shards == 0 {
        anyhow::bail!("--shards must be at least 1");
    }
    use causeway_clickhouse::local_cluster::{Cluster, ClusterOptions};
    let options = ClusterOptions {
        https: a.https,
        zstd: a.zstd,
    };
    let cluster = Cluster::launch(a.shards, options).map_err(anyhow::Error::msg)?;
    if a.https {
        outln!("{}", cluster.https_url(&a.database));
    } else {
        outln!("{}", cluster.url(&a.database));
    }
    statusln!(
        "{} clickhouse-server processes running; press Ctrl-C to stop",
        a.shards
    );
    crate::runtime()?.block_on(crate::stop_requested())?;
    drop(cluster);
    Ok(())
}

fn migrate(a: MigrateArgs) -> Result<()> {
    let endpoint = a
        .store
        .endpoint()?
        .context("--store is required: the ClickHouse store to migrate")?;
    let shown = endpoint.to_string();
    let client = Client::new(endpoint, Duration::from_secs(60))?;
    let nodes = schema::migrate(&client).with_context(|| format!("migrating {shown}"))?;
    if a.json {
        let out = serde_json::json!({ "store": shown, "version": schema::VERSION, "nodes": nodes });
        println!("{out}");
        return Ok(());
    }
    for n in &nodes {
        if n.from == n.to {
            println!("{}: schema version {} (up to date)", n.node, n.to);
        } else {
            println!("{}: schema version {} -> {}", n.node, n.from, n.to);
        }
    }
    Ok(())
}
