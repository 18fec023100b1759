//! The hook an owner of a metadata file (the topic registry, dynamic
//! configs) hands a change's bytes to before it writes them
//! (`crate::cluster_metadata`). Apart from the metadata log itself, so an
//! owner depends on this file alone and the log may name the owners'
//! files without a circle between them.

use std::sync::{Arc, OnceLock};

use crate::error::BrokerError;

/// What a broker-owned file hands a change's bytes to before writing
/// them; an `Err` refuses the change.
pub type Publish = dyn Fn(&[u8]) -> Result<(), BrokerError> + Send + Sync;

/// An owner's [`Publish`] hook: unset until the broker installs it.
#[derive(Default)]
pub struct Hook(OnceLock<Arc<Publish>>);

impl Hook {
    /// Set once; a second call is ignored.
    pub fn set(&self, publish: Arc<Publish>) {
        let _ = self.0.set(publish);
    }

    /// Hands `bytes` to the hook, if one is set.
    pub fn publish(&self, bytes: &[u8]) -> Result<(), BrokerError> {
        self.0.get().map_or(Ok(()), |p| p(bytes))
    }
}

impl std::fmt::Debug for Hook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self.0.get() {
            Some(_) => "Hook(set)",
            None => "Hook(unset)",
        })
    }
}
