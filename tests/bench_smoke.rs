//! `scangate bench` (the command docs/benchmarks.md's figures come from)
//! runs to the end on tiny sizes, embedded and against a redis-server this
//! test starts, and reports every phase. Speed is not asserted here.

use crate::util::{Outcome, RedisServer, cli, tempdir};

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
