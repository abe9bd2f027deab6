//! Build facts for `scangate_build_info`: the commit (`SCANGATE_COMMIT` if
//! set, e.g. by packaging from a tarball; else `git rev-parse`; else
//! "unknown") and the target triple.
//!
//! And the package's generated documents, from the very clap definitions
//! `scangate` parses with (`src/cli/args.rs`, included here with
//! `src/exit.rs`): man pages (`scangate.1` and one per subcommand, gzipped
//! as Debian wants them) and bash, zsh and fish completions, written to
//! `target/<triple>/<profile>/assets/` (beside the binary, where cargo-deb's
//! `target/release/` asset paths find them, also for `--target` builds).

use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "src/exit.rs"]
#[allow(dead_code)]
mod exit;

#[path = "src/cli/args.rs"]
#[allow(dead_code)]
mod args;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
}

fn main() {
    println!("cargo:rerun-if-env-changed=SCANGATE_COMMIT");
    let commit = std::env::var("SCANGATE_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(|| {
            // Rebuilt when HEAD moves (also in a git worktree).
            for path in ["HEAD", "logs/HEAD"] {
                if let Some(p) = git(&["rev-parse", "--git-path", path]) {
                    println!("cargo:rerun-if-changed={p}");
                }
            }
            git(&["rev-parse", "--short=12", "HEAD"])
        })
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=SCANGATE_COMMIT={commit}");
    let target = std::env::var("TARGET").unwrap_or_else(|_| "unknown".into());
    println!("cargo:rustc-env=SCANGATE_TARGET={target}");
    docs();
}

/// `<target dir>/<triple>/<profile>`: OUT_DIR is `<that>/build/<pkg>-<hash>/out`.
fn profile_dir() -> Option<PathBuf> {
    let out = PathBuf::from(std::env::var_os("OUT_DIR")?);
    out.ancestors().nth(3).map(Path::to_path_buf)
}

fn docs() {
    println!("cargo:rerun-if-changed=src/cli/args.rs");
    println!("cargo:rerun-if-changed=src/exit.rs");
    let Some(dir) = profile_dir() else { return };
    let assets = dir.join("assets");
    let man = assets.join("man");
    let completions = assets.join("completions");
    for d in [&man, &completions] {
        std::fs::create_dir_all(d).expect("create the assets directory");
    }
    use clap::CommandFactory;
    let cmd = args::Cli::command();
    clap_mangen::generate_to(cmd.clone(), &man).expect("write the man pages");
    // gzip -9n: reproducible (no name, no time stamp), as Debian policy
    // and lintian want man pages.
    for page in std::fs::read_dir(&man).expect("read the man directory") {
        let page = page.expect("a man page").path();
        if page.extension().is_some_and(|e| e == "1") {
            let ok = Command::new("gzip")
                .args(["-9nf"])
                .arg(&page)
                .status()
                .is_ok_and(|s| s.success());
            if !ok {
                println!(
                    "cargo:warning=gzip failed on {}: the man pages stay uncompressed",
                    page.display()
                );
            }
        }
    }
    use clap_complete::Shell;
    for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
        clap_complete::generate_to(shell, &mut cmd.clone(), "scangate", &completions)
            .expect("write the shell completions");
    }
}
