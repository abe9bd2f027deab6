//! The `[[sink]]`s as the daemon runs them: one thread each
//! ([`crate::sink::run`]), on a yielding companion of the writer's
//! connection, stopped by the daemon's token; a reload hands each its
//! settings read again (token and CA files too) and wakes it, so a
//! blocked batch is tried again at once.

use super::supervisor::{Stage, StageResult, Supervisor};
use crate::config::{Settings, SinkSettings};
use crate::events::Event as _;
use crate::shutdown::Stop;
use crate::sink::run::{Control, Sink};
use crate::store::{Store, StoreError};
use crate::telemetry::Telemetry;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The running sinks' controls, by name.
#[derive(Default)]
pub(crate) struct Sinks {
    controls: BTreeMap<String, Arc<Control>>,
}

/// Start a thread for each of `settings`' sinks.
pub(crate) fn start(
    stages: &mut Supervisor,
    store: &Store,
    settings: &Settings,
    telemetry: &Telemetry,
    stop: &Stop,
) -> Result<Sinks, StoreError> {
    let mut sinks = Sinks::default();
    for s in &settings.sinks {
        let name = s.config.name.clone();
        let control = Control::new(s.clone());
        let sink = Sink {
            store: store.companion()?.yielding(),
            control: control.clone(),
            stop: stop.clone(),
            telemetry: telemetry.clone(),
            gln: settings.config.gateway.gln.clone(),
        };
        crate::events::SinkStarted {
            sink: &name,
            url: &s.config.shown_url(),
            format: s.config.format.as_str(),
        }
        .emit();
        stages.thread(
            Stage::Sink(name.clone()),
            &format!("sink-{name}"),
            move || {
                sink.run();
                StageResult::Done
            },
        );
        sinks.controls.insert(name, control);
    }
    Ok(sinks)
}

impl Sinks {
    /// A reload: each running sink gets its settings read again
    /// (`reload::plan` refused a sink added or removed) and is woken.
    pub(crate) fn reload(&self, sinks: &[SinkSettings]) {
        for s in sinks {
            if let Some(control) = self.controls.get(&s.config.name) {
                control.reload(s.clone());
            }
        }
    }
}
