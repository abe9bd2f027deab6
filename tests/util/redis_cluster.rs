//! A Redis Cluster of the test's own: 3 primaries with a replica each,
//! `redis-server --cluster-enabled yes` on free ports, joined by
//! `redis-cli --cluster create`; and what the cluster tests do to it
//! (migrate a slot, fail over, kill a primary).

use super::daemon::{ScannerSpec, tempdir};
use super::gateway::Gateway;
use super::redis_server::{RedisServer, free_port};
use super::wait::wait_until;
use scangate::facility::cluster::facility_slot;
use std::path::Path;
use std::process::Command;
use tempfile::TempDir;

/// The cluster; its servers are killed on drop.
pub struct RedisCluster {
    /// The nodes (the first three created as primaries).
    pub nodes: Vec<RedisServer>,
    _dir: TempDir,
}

/// A node's reply to `args`.
fn ask<T: redis::FromRedisValue>(node: &RedisServer, args: &[&str]) -> T {
    let mut c = node.connection();
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(&mut c)
        .unwrap_or_else(|e| panic!("{args:?} on port {}: {e}", node.port))
}

impl RedisCluster {
    /// 3 primaries and a replica each (`extra` arguments to every node),
    /// every node agreeing that the cluster is ok and every replica in
    /// sync.
    pub fn start(extra: &[&str]) -> RedisCluster {
        RedisCluster::start_binary("redis-server", extra)
    }

    /// [`RedisCluster::start`] with another server binary (`valkey-server`).
    pub fn start_binary(binary: &str, extra: &[&str]) -> RedisCluster {
        let dir = tempdir("scangate-cluster-");
        let mut args = vec![
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            "nodes.conf",
            "--cluster-node-timeout",
            "1500",
        ];
        args.extend_from_slice(extra);
        // Each node's cluster bus on a free port of its own: by default it
        // is the node's port + 10000, which a free port above 55535 (the
        // ephemeral range reaches 60999) cannot have, and the node would
        // not start.
        let nodes: Vec<RedisServer> = (0..6)
            .map(|i| {
                let bus = free_port().to_string();
                let mut node = args.clone();
                node.extend(["--cluster-port", bus.as_str()]);
                RedisServer::start_binary(binary, &dir.path().join(format!("node{i}")), &node)
            })
            .collect();
        let addrs: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        let out = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(&addrs)
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .output()
            .expect("redis-cli must be installed (apt-get install redis-tools)");
        assert!(
            out.status.success(),
            "redis-cli --cluster create: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        let cluster = RedisCluster { nodes, _dir: dir };
        cluster.wait_settled();
        cluster
    }

    /// Wait until every live node says `cluster_state:ok` and knows 3
    /// primaries with one connected, in-sync replica each.
    pub fn wait_settled(&self) {
        wait_until(
            "the cluster to settle (state ok, a replica per primary)",
            || {
                self.nodes.iter().filter(|n| n.answers()).all(|n| {
                    let info: String = ask(n, &["CLUSTER", "INFO"]);
                    info.contains("cluster_state:ok")
                }) && self.primaries().iter().all(|&p| {
                    let info: String = ask(&self.nodes[p], &["INFO", "replication"]);
                    info.contains("connected_slaves:1") && info.contains("state=online")
                })
            },
        );
    }

    /// `[redis]` for the cluster (every node a seed; 300 ms connect, 500 ms
    /// per command).
    pub fn section(&self) -> String {
        let seeds: Vec<String> = self
            .nodes
            .iter()
            .map(|n| format!("\"127.0.0.1:{}\"", n.port))
            .collect();
        format!(
            "[redis]\ncluster = [{}]\nconnect_timeout_ms = 300\ncommand_timeout_ms = 500\n",
            seeds.join(", ")
        )
    }

    /// [`RedisCluster::section`] as the daemon reads it, secrets read.
    pub fn settings(&self) -> scangate::facility::config::RedisSettings {
        let body = self.section().replace("[redis]\n", "");
        let config: scangate::facility::config::RedisConfig =
            toml::from_str(&body).expect("the [redis] section");
        config.validate().expect("a valid [redis] section");
        config.resolve().expect("no secrets to read")
    }

    /// The nodes that are primaries now (and answer).
    pub fn primaries(&self) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|&i| self.nodes[i].answers() && self.role(i) == "master")
            .collect()
    }

    /// `master` or `slave`.
    pub fn role(&self, node: usize) -> String {
        let info: String = ask(&self.nodes[node], &["INFO", "replication"]);
        info.lines()
            .find_map(|l| l.strip_prefix("role:"))
            .unwrap_or("?")
            .trim()
            .to_string()
    }

    /// The node id.
    pub fn id(&self, node: usize) -> String {
        ask(&self.nodes[node], &["CLUSTER", "MYID"])
    }

    /// The node that owns `slot`, as node `by` sees it.
    pub fn owner_seen_by(&self, by: usize, slot: u16) -> usize {
        let nodes: String = ask(&self.nodes[by], &["CLUSTER", "NODES"]);
        for line in nodes.lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            if !f[2].contains("master") || f[2].contains("fail") {
                continue;
            }
            let owns = f[8..].iter().any(|r| match r.split_once('-') {
                _ if r.starts_with('[') => false,
                Some((a, b)) => (a.parse().unwrap()..=b.parse().unwrap()).contains(&slot),
                None => r.parse::<u16>().unwrap() == slot,
            });
            if owns {
                let port: u16 = f[1].split(['@', ':']).nth(1).unwrap().parse().unwrap();
                return self.nodes.iter().position(|n| n.port == port).unwrap();
            }
        }
        panic!("no node owns slot {slot}:\n{nodes}");
    }

    /// The primary that owns `facility`'s slot.
    pub fn owner(&self, facility: &str) -> usize {
        let by = self.primaries()[0];
        self.owner_seen_by(by, facility_slot(facility))
    }

    /// The replica of primary `node`.
    pub fn replica_of(&self, node: usize) -> usize {
        let id = self.id(node);
        (0..self.nodes.len())
            .find(|&i| {
                self.nodes[i].answers() && {
                    let nodes: String = ask(&self.nodes[i], &["CLUSTER", "NODES"]);
                    nodes
                        .lines()
                        .any(|l| l.contains("myself") && l.contains("slave") && l.contains(&id))
                }
            })
            .expect("a replica")
    }

    /// Start migrating `slot` from `from` to `to` (`IMPORTING` on `to`,
    /// `MIGRATING` on `from`): commands whose keys are gone are `ASK`ed
    /// there.
    pub fn begin_migration(&self, slot: u16, from: usize, to: usize) {
        let s = slot.to_string();
        let _: () = ask(
            &self.nodes[to],
            &["CLUSTER", "SETSLOT", &s, "IMPORTING", &self.id(from)],
        );
        let _: () = ask(
            &self.nodes[from],
            &["CLUSTER", "SETSLOT", &s, "MIGRATING", &self.id(to)],
        );
    }

    /// Move every key of `slot` still on `from` to `to` (`MIGRATE`).
    pub fn migrate_keys(&self, slot: u16, from: usize, to: usize) -> usize {
        let s = slot.to_string();
        let mut moved = 0;
        loop {
            let keys: Vec<String> =
                ask(&self.nodes[from], &["CLUSTER", "GETKEYSINSLOT", &s, "100"]);
            if keys.is_empty() {
                return moved;
            }
            let port = self.nodes[to].port.to_string();
            let mut args = vec!["MIGRATE", "127.0.0.1", &port, "", "0", "5000", "KEYS"];
            args.extend(keys.iter().map(String::as_str));
            let _: String = ask(&self.nodes[from], &args);
            moved += keys.len();
        }
    }

    /// End the migration: `slot` is `to`'s (told to both and every other
    /// primary).
    pub fn end_migration(&self, slot: u16, to: usize) {
        let (s, id) = (slot.to_string(), self.id(to));
        for p in self.primaries() {
            let _: () = ask(&self.nodes[p], &["CLUSTER", "SETSLOT", &s, "NODE", &id]);
        }
    }

    /// `CLUSTER FAILOVER` on replica `node`; waits until it is a primary.
    pub fn failover(&self, node: usize) {
        let _: () = ask(&self.nodes[node], &["CLUSTER", "FAILOVER"]);
        wait_until("the replica to be promoted", || self.role(node) == "master");
    }

    /// The facility ledger stream's `scan_uuid`s and `content_key`s (read
    /// on the primary that owns its slot).
    pub fn ledger(&self, facility: &str) -> Vec<(String, String)> {
        self.nodes[self.owner(facility)].ledger(facility)
    }
}

impl Gateway {
    /// Gateway `name` (its directory `root/name`) of `facility` in
    /// `cluster`, hearing the shared scanner `roaming`; not started.
    pub fn in_cluster(root: &Path, name: &str, facility: &str, cluster: &RedisCluster) -> Gateway {
        let g = Gateway::builder_in(&root.join(name))
            .id(name)
            .pty(ScannerSpec::named("roaming").ack().with("shared = true"))
            .config(&cluster.section())
            .build();
        g.edit_config(|t| {
            t.replace(
                "facility = \"test-pharmacy\"",
                &format!("facility = {facility:?}"),
            )
        });
        g
    }
}
