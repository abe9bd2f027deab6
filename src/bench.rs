//! `scangate bench` (stub).

/// Benchmark arguments.
#[derive(clap::Args, Debug)]
pub struct BenchArgs {}

/// Run the benchmark.
pub fn run(_args: &BenchArgs) -> Result<u8, String> {
    Err("not built yet".into())
}
