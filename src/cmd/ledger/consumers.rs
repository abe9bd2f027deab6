//! `ledger consumers list [--json]` and `ledger consumers remove NAME`: the
//! cursors kept in the gateway's database ([`crate::ledger::cursor`]).

use crate::cli::args::ConsumersCommand;
use crate::cmd::status::{LedgerConsumerView, render_consumer};
use crate::cmd::{Failure, load};
use crate::events::Event as _;
use crate::exit::Exit;
use crate::ledger::cursor;
use crate::store::Store;

/// Run a `ledger consumers` subcommand.
pub(super) fn run(command: ConsumersCommand) -> Result<Exit, Failure> {
    match command {
        ConsumersCommand::List { config, json } => {
            let cfg = load(&config)?;
            let store = Store::open_read_only(&cfg.state_dir())?;
            let lags = {
                let r = store.read()?;
                cursor::lags(&r).map_err(|e| store.err_at(e))?
            };
            if json {
                println!("{}", serde_json::to_string(&lags).expect("lags serialise"));
            } else if lags.is_empty() {
                println!(
                    "no ledger consumer (`scangate ledger export --follow --consumer NAME` registers one)"
                );
            } else {
                let now = chrono::Utc::now().timestamp_millis();
                for lag in &lags {
                    println!("{}", render_consumer(&LedgerConsumerView::of(lag, now)));
                }
            }
            Ok(Exit::Ok)
        }
        ConsumersCommand::Remove { config, name } => {
            let cfg = load(&config)?;
            let mut store = Store::open_unlocked(&cfg.state_dir())?;
            let w = store.write()?;
            let removed = cursor::remove(&w, &name).map_err(|e| w.err(e))?;
            w.commit()?;
            if removed {
                crate::events::LedgerConsumer::Removed { consumer: &name }.emit();
                println!(
                    "consumer {name} removed: `audit prune` no longer keeps the entries it had not acknowledged"
                );
                Ok(Exit::Ok)
            } else {
                println!("no consumer {name:?} (`scangate ledger consumers list` shows the names)");
                Ok(Exit::CheckFailed)
            }
        }
    }
}
