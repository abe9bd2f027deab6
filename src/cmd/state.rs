//! `scangate state reset --confirm ID`: start over after the database was
//! lost ([`crate::audit::reset`]: a new state whose audit chain starts with
//! the reset).

use super::{Failure, load};
use crate::audit::reset::{Reset, reset};
use crate::cli::args::StateCommand;
use crate::exit::Exit;

/// Run a `state` subcommand.
pub fn run(command: StateCommand) -> Result<Exit, Failure> {
    let StateCommand::Reset { config, confirm } = command;
    let cfg = load(&config)?;
    let dir = cfg.state_dir();
    match reset(&dir, &confirm, &cfg.gateway.id)? {
        Reset::Done {
            new_id,
            lost_id,
            moved_aside,
        } => {
            println!(
                "state reset: state {lost_id} is gone; new state {new_id} in {}, with an empty ledger; its audit chain starts with the reset (record 1)",
                dir.display()
            );
            for p in moved_aside {
                println!("moved aside (not deleted): {}", p.display());
            }
            Ok(Exit::Ok)
        }
        Reset::Intact { id } => Err(Failure::Usage(format!(
            "nothing to reset: the database in {} is there and is this state's own (state {}). A reset is only for a state that lost its database",
            dir.display(),
            id.as_deref().unwrap_or("without an identity yet")
        ))),
        Reset::WrongConfirm { expected } => Err(Failure::Usage(format!(
            "--confirm {confirm:?} does not name the lost state of {}: type `--confirm {expected}` to reset it (its ledger and audit trail are then abandoned)",
            dir.display()
        ))),
    }
}
