//! [`Settings`]: the configuration with the secrets and files it names
//! read, once ([`Settings::resolve`]).

use super::{Config, ConfigError, RedisSettings, SinkSettings};
use std::path::Path;

/// The configuration with everything it points to read: what `run` works
/// with. `check-config` resolves the same way, so it refuses what `run`
/// would (an unreadable `password_file` or `ca_file`, a sink's token file).
#[derive(Debug, Clone)]
pub struct Settings {
    /// The validated configuration.
    pub config: Config,
    /// `[redis]` with its password and CA read; `None`: embedded store.
    pub redis: Option<RedisSettings>,
    /// Each `[[sink]]` with its CA and credentials read.
    pub sinks: Vec<SinkSettings>,
}

impl Settings {
    /// Read the secrets and files `cfg` names (once; errors name the key).
    pub fn resolve(cfg: &Config) -> Result<Settings, ConfigError> {
        Settings::resolve_from(cfg, None)
    }

    /// [`Config::load`], then [`Settings::resolve`]; errors name the file.
    pub fn load(path: Option<&Path>) -> Result<Settings, ConfigError> {
        Settings::resolve_from(&Config::load(path)?, path)
    }

    fn resolve_from(cfg: &Config, file: Option<&Path>) -> Result<Settings, ConfigError> {
        let redis = match &cfg.redis {
            None => None,
            Some(r) => Some(
                r.resolve()
                    .map_err(|e| ConfigError::new(file, e.within("redis")))?,
            ),
        };
        let sinks = cfg
            .sinks
            .iter()
            .enumerate()
            .map(|(i, s)| {
                s.resolve()
                    .map_err(|e| ConfigError::new(file, e.within(&format!("sink[{i}]"))))
            })
            .collect::<Result<_, _>>()?;
        Ok(Settings {
            config: cfg.clone(),
            redis,
            sinks,
        })
    }
}
