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
