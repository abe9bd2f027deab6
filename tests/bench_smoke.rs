//! `scangate bench` (the command docs/benchmarks.md's figures come from)
//! runs to the end on tiny sizes, embedded and against a redis-server this
//! test starts, and reports every phase. Speed is not asserted here.

use crate::util::{RedisServer, tempdir};
use std::process::Command;

fn bench(args: &[&str]) -> String {
    let dir = tempdir("bench-smoke");
    let out = Command::new(env!("CARGO_BIN_EXE_scangate"))
        .arg("bench")
        .args(["--dir", dir.path().to_str().expect("utf-8 temp path")])
        .args(args)
        .output()
        .expect("running scangate bench");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "bench {args:?} failed ({:?})\nstdout:\n{stdout}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn the_embedded_bench_reports_throughput_and_latency() {
    let out = bench(&["--scans", "3000", "--rate", "100", "--seconds", "1"]);
    assert!(out.contains("decisions/s"), "{out}");
    assert!(out.contains("capture->decision p50"), "{out}");
}

#[test]
fn the_facility_bench_drains_a_backlog_and_reports_cpu_and_writes() {
    let dir = tempdir("bench-smoke-redis");
    let redis = RedisServer::start(dir.path(), &[]);
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
