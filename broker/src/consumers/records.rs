//! The records call: one try reads the held partitions from their
//! positions, starting one partition further each call, within the call's
//! byte bound and [`RECORDS_PER_CALL_MAX`]; with nothing to answer it
//! returns the listeners to wait on (the instance's deletion, the group,
//! every held partition past what the read found), registered before the
//! re-check so no record is missed.
//!
//! Invariant kept here: positions move only after the answer was rendered,
//! so a render that fails consumes nothing.

use std::sync::Arc;

use event_listener::EventListener;

use super::instance::Instance;
use super::offsets::{commit_uncommitted, resolve_position};
use super::{Consumers, Poll, PolledRecords, AUTO_COMMIT_INTERVAL_MS, RECORDS_PER_CALL_MAX};
use crate::coordinator::TopicPartition;
use crate::error::BrokerError;
use crate::read::Records;
use crate::Broker;

impl Consumers {
    /// One try of a records call: up to `max_bytes` of payload (at least
    /// one record if there is one) and [`RECORDS_PER_CALL_MAX`] records
    /// from the held partitions, starting one partition further each call.
    /// With nothing (or less than `fetch.min.bytes`) and `last` false: the
    /// listeners to wait on. Blocking (auto commit appends; compacted
    /// partitions are read with `pread`).
    ///
    /// `render` turns the records into the answer before the positions
    /// move: if it fails (a value the format cannot show), nothing is
    /// consumed, so no record is skipped.
    pub fn poll<R, E: From<BrokerError>>(
        &self,
        group: &str,
        name: &str,
        max_bytes: usize,
        last: bool,
        render: impl FnOnce(&[PolledRecords]) -> Result<R, E>,
    ) -> Result<Poll<R>, E> {
        let mut render = Some(render);
        let mut rendered = None;
        let polled = self.with_one(group, name, false, |broker, inst| {
            if inst.config.auto_commit {
                commit_uncommitted(broker, group, name, inst);
            }
            self.refresh(broker, group, name, inst)?;
            // A record added between a read and its listener shows in the
            // listener's re-check; then read again (a few times at most,
            // then answer what there is).
            let mut take = |inst: &mut Instance, read: HeldRead| {
                let Some(render) = render.take() else {
                    return;
                };
                let result = render(&read.polled);
                if result.is_ok() {
                    self.apply_read(inst, &read);
                }
                rendered = Some(result);
            };
            for _ in 0..3 {
                let read = read_held(broker, group, inst, max_bytes)?;
                let enough = read.bytes >= inst.config.fetch_min_bytes.max(1);
                if (enough && !read.batches.is_empty()) || last {
                    take(inst, read);
                    return Ok(None);
                }
                match self.listeners(broker, group, inst, &read)? {
                    Some(listeners) => return Ok(Some(listeners)),
                    None => continue,
                }
            }
            let read = read_held(broker, group, inst, max_bytes)?;
            take(inst, read);
            Ok(None)
        })?;
        match (polled, rendered) {
            (Some(listeners), _) => Ok(Poll::Wait(listeners)),
            (None, Some(result)) => result.map(Poll::Records),
            (None, None) => Err(BrokerError::RecordsCallUnanswered.into()),
        }
    }

    /// Applies a read that was answered: positions move, returned and
    /// uncommitted offsets are noted, the start rotates.
    fn apply_read(&self, inst: &mut Instance, read: &HeldRead) {
        for (tp, next) in &read.batches {
            let (tp, next) = (tp.clone(), *next);
            inst.positions.insert(tp.clone(), next);
            inst.returned.insert(tp.clone(), next);
            if inst.config.auto_commit {
                inst.uncommitted.insert(tp, next);
                inst.auto_commit_due_ms.get_or_insert(
                    self.coordinator
                        .now_ms()
                        .saturating_add(AUTO_COMMIT_INTERVAL_MS),
                );
            }
        }
        if !inst.held.is_empty() {
            inst.next_start = (read.start + 1) % inst.held.len();
        }
    }

    /// Listeners of the instance itself (its deletion), of every held
    /// partition (past what the read found) and of the group; `None` if a partition has records already.
    fn listeners(
        &self,
        broker: &Arc<Broker>,
        group: &str,
        inst: &Instance,
        read: &HeldRead,
    ) -> Result<Option<Vec<EventListener>>, BrokerError> {
        let mut listeners = Vec::with_capacity(read.next.len() + 2);
        // Deleted or expired meanwhile: the call wakes and answers 404.
        listeners.push(inst.gone.listen());
        if let Some(l) = self.coordinator.listen(group) {
            listeners.push(l);
        }
        if inst.rebalancing {
            return Ok(Some(listeners));
        }
        for (tp, from) in &read.listen {
            let Ok(part) = broker.partition(&tp.topic, tp.partition) else {
                continue;
            };
            match part.listen(*from)? {
                Some(l) => listeners.push(l),
                None => return Ok(None),
            }
        }
        Ok(Some(listeners))
    }
}

/// One read over the held partitions, not yet applied.
struct HeldRead {
    /// (partition, next offset) of the partitions with records, and their
    /// records, in the same order.
    batches: Vec<(TopicPartition, u64)>,
    polled: Vec<PolledRecords>,
    /// Every held partition and its position after this read.
    next: Vec<(TopicPartition, u64)>,
    /// Every held partition and where a wait for it starts (its next
    /// position, or at read_committed the end a marker will land at).
    listen: Vec<(TopicPartition, u64)>,
    bytes: u64,
    start: usize,
}

/// Reads the held partitions from their positions (resolved first),
/// starting at `next_start`, within `max_bytes` (one record over it only
/// if it is the first) and [`RECORDS_PER_CALL_MAX`].
fn read_held(
    broker: &Arc<Broker>,
    group: &str,
    inst: &mut Instance,
    max_bytes: usize,
) -> Result<HeldRead, BrokerError> {
    let held = if inst.rebalancing {
        Vec::new()
    } else {
        inst.held.clone()
    };
    let start = if held.is_empty() {
        0
    } else {
        inst.next_start % held.len()
    };
    let mut read = HeldRead {
        batches: Vec::new(),
        polled: Vec::new(),
        next: Vec::with_capacity(held.len()),
        listen: Vec::with_capacity(held.len()),
        bytes: 0,
        start,
    };
    let max_bytes = max_bytes as u64;
    let mut records_left = RECORDS_PER_CALL_MAX;
    for i in 0..held.len() {
        let tp = &held[(start + i) % held.len()];
        let part = match broker.partition(&tp.topic, tp.partition) {
            Ok(part) => part,
            // Deleted since it was assigned: the next rebalance drops it.
            Err(BrokerError::UnknownTopic { .. } | BrokerError::UnknownPartition { .. }) => {
                continue
            }
            Err(e) => return Err(e),
        };
        let position = resolve_position(broker, group, inst, tp, &part)?;
        if records_left == 0 || read.bytes >= max_bytes {
            read.next.push((tp.clone(), position));
            read.listen.push((tp.clone(), position));
            continue;
        }
        let left_bytes = usize::try_from(max_bytes - read.bytes).unwrap_or(usize::MAX);
        let (batch, listen_from) = if inst.config.read_committed {
            part.read_committed_blocking(position, records_left, left_bytes)?
        } else {
            let batch = part.read_tiered_blocking(position, records_left, left_bytes)?;
            let next = batch.next_offset;
            (batch, next)
        };
        let mut records = batch.records;
        let mut kept = 0;
        let mut bytes = 0u64;
        for r in records.iter() {
            let size = r.payload_bytes();
            let first = read.batches.is_empty() && kept == 0;
            if !first && read.bytes + bytes + size > max_bytes {
                break;
            }
            bytes += size;
            kept += 1;
        }
        let whole = kept == records.len();
        let next = if whole {
            batch.next_offset
        } else if kept == 0 {
            position
        } else {
            records
                .iter()
                .nth(kept - 1)
                .map_or(position, |r| r.offset() + 1)
        };
        truncate(&mut records, kept);
        read.next.push((tp.clone(), next.max(position)));
        // A read cut short has records left at `next`; a whole one waits
        // where the read says (at read_committed, the end).
        let listen = if whole { listen_from.max(next) } else { next };
        read.listen.push((tp.clone(), listen.max(position)));
        if kept > 0 {
            records_left -= kept;
            read.bytes += bytes;
            read.batches.push((tp.clone(), next));
            read.polled.push(PolledRecords {
                topic: Arc::clone(&part.topic().name),
                records,
            });
        }
    }
    Ok(read)
}

fn truncate(records: &mut Records, len: usize) {
    match records {
        Records::Stored(r) => r.truncate(len),
        Records::Compacted { records, .. } => records.truncate(len),
        Records::Remote { records, .. } => records.truncate(len),
    }
}
