//! The `scangate` command line: parse the arguments, set up logging, run
//! the command ([`crate::cmd`]) and turn its outcome into an exit code
//! ([`crate::exit::Exit`], whose meanings are listed once, there; which
//! error gets which code is decided once, in [`crate::cmd::Failure::exit`]).

use crate::cmd::{self, Failure};
use crate::exit::Exit;
use args::{
    AuditCommand, Cli, Command, ConfigArg, ConsumersCommand, LabelsArgs, LedgerCommand,
    OutboxCommand, ProductsCommand, RecallsCommand, StateCommand, TapArgs,
};
use clap::{CommandFactory, FromArgMatches};
use std::process::ExitCode;

pub(crate) mod args;

/// `scangate --version`: the version, the database schema version, the
/// commit it was built from and the target triple ([`crate::build`], as
/// `scangate_build_info` has them).
/// (Made once per process: clap keeps a `&'static str`.)
fn version() -> &'static str {
    use crate::build::{COMMIT, SCHEMA_VERSION, TARGET, VERSION};
    String::leak(format!(
        "{VERSION} (schema {SCHEMA_VERSION}, commit {COMMIT}, target {TARGET})"
    ))
}

/// Entry point of the binary.
pub fn main() -> ExitCode {
    // (`--version` names the commit and target, which `build.rs` knows
    // only for the binary, not for the man page it generates.)
    let cli = Cli::from_arg_matches(&Cli::command().version(version()).get_matches())
        .unwrap_or_else(|e| e.exit());
    // The demo and the benchmark print their own report (the demo's rejects
    // in its table); keep the log quiet.
    let quiet = matches!(cli.command, Command::Demo { .. } | Command::Bench(_));
    crate::logging::init(
        cli.log_format,
        if quiet {
            "warn,scangate::reject=error"
        } else {
            "info"
        },
    );
    crate::files::restrict_umask();
    // Read before the command runs (it may create what is looked for).
    let no_config_file = cli.command.config().is_some_and(|c| c.path().is_none());
    match dispatch(cli.command) {
        Ok(exit) => exit.into(),
        Err(f) => {
            eprintln!("scangate: {}", f.message());
            if no_config_file && matches!(f, Failure::Store(_) | Failure::Daemon(_)) {
                // The state directory came from the defaults: the likelier
                // fix is the config that was not found.
                eprintln!(
                    "scangate: note: no config file was read (no --config, no SCANGATE_CONFIG, nothing at {}), so the state directory is the default one ($STATE_DIRECTORY, else ./scangate-state in the current directory). If this gateway's config is elsewhere, name it with --config",
                    crate::config::DEFAULT_PATH
                );
            }
            f.exit().into()
        }
    }
}

/// Run the command: each one's module in [`crate::cmd`].
fn dispatch(command: Command) -> Result<Exit, Failure> {
    match command {
        Command::Run(config) => cmd::run::run(&config),
        Command::CheckConfig { config, online } => cmd::check_config::run(&config, online),
        Command::Status { config, json } => cmd::status::run(&config, json),
        Command::Outbox { command } => cmd::outbox::run(command),
        Command::Ledger { command } => cmd::ledger::run(command),
        Command::Audit { command } => cmd::audit::run(command),
        Command::State { command } => cmd::state::run(command),
        Command::Products { command } => cmd::products::run(command),
        Command::Recalls { command } => cmd::products::recalls(command),
        Command::Decode(args) => cmd::decode::run(&args),
        Command::Devices(args) => cmd::devices::run(&args),
        Command::Pair(args) => cmd::devices::pair(&args),
        Command::Demo { redis } => cmd::demo::run(redis),
        Command::Bench(args) => cmd::bench::run(&args),
        Command::Labels(args) => cmd::labels::run(&args),
        Command::Diag { config, out } => cmd::diag::run(&config, &out),
        Command::Tap(args) => cmd::tap::run(&args),
        Command::Top { config } => cmd::top::run(&config),
    }
}

impl Command {
    /// The command's config argument, if it reads a config file.
    fn config(&self) -> Option<&ConfigArg> {
        match self {
            Command::Run(c)
            | Command::CheckConfig { config: c, .. }
            | Command::Status { config: c, .. }
            | Command::Ledger {
                command:
                    LedgerCommand::Export { config: c, .. }
                    | LedgerCommand::Consumers {
                        command:
                            ConsumersCommand::List { config: c, .. }
                            | ConsumersCommand::Remove { config: c, .. },
                    },
            }
            | Command::Audit {
                command:
                    AuditCommand::Verify { config: c, .. }
                    | AuditCommand::Export { config: c, .. }
                    | AuditCommand::Prune { config: c, .. }
                    | AuditCommand::Trace { config: c, .. },
            }
            | Command::Outbox {
                command: OutboxCommand::Status { config: c, .. } | OutboxCommand::DecideLocally(c),
            }
            | Command::State {
                command: StateCommand::Reset { config: c, .. },
            }
            | Command::Products {
                command:
                    ProductsCommand::Import { config: c, .. } | ProductsCommand::Show { config: c, .. },
            }
            | Command::Recalls {
                command: RecallsCommand::Import { config: c, .. },
            }
            | Command::Labels(LabelsArgs { config: c, .. })
            | Command::Diag { config: c, .. }
            | Command::Tap(TapArgs { config: c, .. })
            | Command::Top { config: c } => Some(c),
            Command::Demo { .. }
            | Command::Bench(_)
            | Command::Decode(_)
            | Command::Devices(_)
            | Command::Pair(_) => None,
        }
    }
}
