//! `scangate bench` (the command docs/benchmarks.md's figures come from)
//! runs to the end on tiny sizes, embedded and against a redis-server this
//! test starts, and reports every phase. Speed is not asserted here. The
//! SD-card profile's fsync shim (`benches/slowsync.c`) builds and holds up
//! the binary's commits.

use crate::util::{Outcome, RedisServer, cli, command, tempdir};

fn bench(args: &[&str]) -> String {
    let dir = tempdir("bench-smoke");
    let dir = dir.path().to_str().expect("utf-8 temp path");
    let out: Outcome = cli(&[&["bench", "--dir", dir], args].concat()).into();
    assert_eq!(out.code, Some(0), "bench {args:?} failed: {out}");
    out.stdout
}

#[test]
fn the_embedded_bench_reports_throughput_and_latency() {
    let out = bench(&["--scans", "3000", "--rate", "100", "--seconds", "1"]);
    assert!(out.contains("decisions/s"), "{out}");
    assert!(out.contains("capture->decision p50"), "{out}");
}

#[test]
fn the_facility_bench_drains_a_backlog_and_reports_cpu_and_writes() {
    let redis = RedisServer::start_temp(&[]);
    let out = bench(&[
        "--redis",
        &redis.url(),
        "--scans",
        "2000",
        "--backlog",
        "2000",
        "--rate",
        "100",
        "--seconds",
        "1",
    ]);
    assert!(
        out.contains("backlog drain: 2000 unresolved scans decided"),
        "{out}"
    );
    assert!(out.contains("throughput: 2000 decisions"), "{out}");
    // Both phases say what they cost, so a figure can be read against the
    // machine it ran on.
    assert_eq!(out.matches("CPU per scan: gateway").count(), 2, "{out}");
    assert_eq!(out.matches("storage writes:").count(), 2, "{out}");
    assert!(out.contains("latency at 100 reads/s"), "{out}");
}

/// The SD-card profile's shim (`benches/slowsync.c`, docs/benchmarks.md)
/// builds with `cc`, loads into the real binary and delays the fsync of its
/// commits: under a 30 ms fsync, a read decided alone (one commit) takes at
/// least that at the median. That is a floor the shim's sleep guarantees
/// (the check that the delay applies), not a speed.
#[test]
fn the_sd_card_shim_delays_every_commit_of_the_binary() {
    let dir = tempdir("slowsync");
    let so = dir.path().join("slowsync.so");
    let src = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/slowsync.c");
    let built = std::process::Command::new("cc")
        .args(["-O2", "-shared", "-fPIC", "-o"])
        .arg(&so)
        .arg(src)
        .arg("-ldl")
        .status()
        .expect("running cc");
    assert!(built.success(), "cc could not build {src}");
    let state = dir.path().join("state");
    std::fs::create_dir(&state).expect("state directory");
    let out: Outcome = command()
        .args(["bench", "--dir"])
        .arg(&state)
        .args(["--scans", "500", "--rate", "20", "--seconds", "1"])
        .env("LD_PRELOAD", &so)
        .env("SCANGATE_FSYNC_DELAY_MS", "30")
        .output()
        .expect("running scangate bench")
        .into();
    assert_eq!(out.code, Some(0), "bench under the shim failed: {out}");
    let p50: f64 = out
        .stdout
        .split("capture->decision p50 ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|ms| ms.parse().ok())
        .unwrap_or_else(|| panic!("no capture->decision p50 in {out}"));
    assert!(
        p50 >= 30.0,
        "a read alone was decided in {p50} ms although every fsync takes 30: the shim did not apply\n{out}"
    );
}

/// The first number after `before` in `out`.
fn number_after(out: &str, before: &str) -> u64 {
    let at = out
        .find(before)
        .unwrap_or_else(|| panic!("no {before:?} in {out}"))
        + before.len();
    out[at..]
        .split(|c: char| !c.is_ascii_digit())
        .find(|w| !w.is_empty())
        .and_then(|w| w.parse().ok())
        .unwrap_or_else(|| panic!("no number after {before:?} in {out}"))
}

/// The commits the capacity and shift phases report ("…, N committed)"), summed.
fn committed(out: &str) -> u64 {
    out.lines()
        .filter(|l| l.starts_with("capacity:") || l.starts_with("shift"))
        .map(|l| {
            let end = l.find(" committed").expect("a committed count");
            let start = l[..end].rfind(|c: char| !c.is_ascii_digit()).unwrap() + 1;
            l[start..end].parse::<u64>().unwrap()
        })
        .sum()
}

/// The load generator (`bench --gateways`) at its smallest,
/// against a 3-primary cluster: every phase reports, and what the
/// simulated gateways were told was committed is exactly what the
/// facilities' ledger streams hold (read on the primaries that own their
/// slots), each scan once; the busy facility, its keys deleted, is
/// re-published whole.
#[test]
fn the_load_generator_runs_against_a_cluster_and_its_commits_are_the_ledgers() {
    let cluster = crate::util::RedisCluster::start(&[]);
    let seeds: Vec<String> = cluster
        .nodes
        .iter()
        .map(|n| format!("127.0.0.1:{}", n.port))
        .collect();
    let out = bench(&[
        "--gateways",
        "4",
        "--facilities",
        "3",
        "--cluster",
        &seeds.join(","),
        "--seconds",
        "1",
        "--gateway-rate",
        "20",
        "--republish",
        "600",
    ]);
    assert!(out.contains("3 primaries"), "{out}");
    for phase in [
        "capacity:",
        "shift:",
        "memory:",
        "shift during the re-publish:",
    ] {
        assert!(out.contains(phase), "no {phase} in {out}");
    }
    assert!(
        out.contains("600 claims re-published") && out.contains("as many as before: true"),
        "{out}"
    );
    let run = out
        .split_whitespace()
        .find_map(|w| w.strip_prefix('(')?.strip_suffix("-f0"))
        .unwrap_or_else(|| panic!("no run id in {out}"));
    let mut in_ledgers = 0;
    for f in 0..3 {
        let ledger = cluster.ledger(&format!("{run}-f{f}"));
        let uuids: std::collections::HashSet<&String> = ledger.iter().map(|(u, _)| u).collect();
        assert_eq!(uuids.len(), ledger.len(), "a scan twice in facility {f}");
        assert!(!ledger.is_empty(), "facility {f} has no entry");
        in_ledgers += ledger.len() as u64;
    }
    assert_eq!(in_ledgers, committed(&out), "{out}");
    assert_eq!(
        cluster.ledger(&format!("{run}-busy")).len() as u64,
        number_after(&out, "claims/s, "),
        "{out}"
    );
}
