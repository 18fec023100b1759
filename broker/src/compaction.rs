//! Compaction on request (a front-end's "compact this topic now").

use crate::broker::Broker;
use crate::error::BrokerError;
use crate::registry::Topic;

impl Broker {
    /// Requests a cleaning pass of every partition of compact `topic`
    /// (`roll_active`: roll the active segments first, so all of it is
    /// cleanable). Every partition gets a compacted log first, so every
    /// one is requested and can be waited for, written to or not. Returns
    /// each partition with the number of passes started before the request
    /// (`LogCleaner::wait` takes them). Blocking.
    pub fn request_compaction(
        &self,
        topic: &Topic,
        roll_active: bool,
    ) -> Result<Vec<(u32, u64)>, BrokerError> {
        for p in 0..topic.partitions.get() {
            self.logs.log_or_create(&topic.name, p)?;
        }
        Ok(self.cleaner.request(&topic.name, roll_active)?)
    }
}
