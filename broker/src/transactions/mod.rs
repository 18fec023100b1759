//! The transaction coordinator's state machine (Kafka's KIP-98, with
//! KIP-360's epoch bumps): for each transactional id, its producer id and
//! epoch, its state, the partitions its open transaction wrote to, and the
//! rules each transaction call follows. Issue 38 builds transactions in
//! steps; this is the first, and nothing serves it yet.
//!
//! Pure, like `coordinator::consumer`: time comes in as `now_ms`, producer
//! ids from an allocator, and what must happen outside comes out. Each
//! call that changes a transaction answers the [`Transition`] to make
//! durable (the `__transaction_state` record, later) and, for the end of a
//! transaction, the partitions to write its COMMIT or ABORT marker to.
//! While a transition is out ([`TxnMetadata::pending`]) every other call on
//! that id is CONCURRENT_TRANSACTIONS, Kafka's retriable answer, so what is
//! durable and what is in memory never disagree: [`Transactions::complete`]
//! applies the transition once it is durable, [`Transactions::abandon`]
//! drops it when it could not be made so.
//!
//! The states and their order are Kafka's:
//!
//! ```text
//! Empty ──add partitions──▶ Ongoing ──end(commit)──▶ PrepareCommit ──markers──▶ CompleteCommit
//!   ▲                          │  └────end(abort)──▶ PrepareAbort  ──markers──▶ CompleteAbort
//!   └── InitProducerId ◀───────┼─────────────────────────────────────────────────┘
//!                              └─ timeout, or a new producer's InitProducerId:
//!                                 PrepareEpochFence ─▶ PrepareAbort (epoch + 1)
//! ```
//!
//! Fencing: InitProducerId bumps the epoch, so the previous producer of the
//! id (a zombie) is PRODUCER_FENCED from then on; a transaction still open
//! is aborted first (the new producer is told CONCURRENT_TRANSACTIONS and
//! retries). A transaction open longer than its timeout is aborted the
//! same way, epoch bumped. An epoch that cannot grow takes a new producer
//! id (KIP-360), and a retried InitProducerId whose answer was lost (the
//! client names the epoch before the bump) gets the same answer again.

pub mod log;
pub mod service;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};

/// Kafka's `transaction.max.timeout.ms` default: a producer asking more is
/// INVALID_TRANSACTION_TIMEOUT.
pub const TRANSACTION_MAX_TIMEOUT_MS: u32 = 900_000;
/// Transactional ids kept at once: each holds its partitions' names.
pub const TRANSACTIONAL_IDS_MAX: usize = 100_000;
/// Partitions one transaction may write to.
pub const PARTITIONS_PER_TRANSACTION_MAX: usize = 10_000;
/// A transactional id, at most (Kafka bounds it by the request's string).
pub const TRANSACTIONAL_ID_MAX_BYTES: usize = 32_767;
/// The last epoch a producer id may take; past it, a new id.
const EPOCH_MAX: i16 = i16::MAX - 1;

/// A transaction's state (Kafka's `TransactionState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum TxnState {
    Empty,
    Ongoing,
    PrepareCommit,
    PrepareAbort,
    CompleteCommit,
    CompleteAbort,
    /// An open transaction being aborted because its producer was fenced
    /// (a new InitProducerId, or its timeout); becomes PrepareAbort.
    PrepareEpochFence,
}

impl TxnState {
    /// Kafka's name (DescribeTransactions, ListTransactions).
    pub fn name(self) -> &'static str {
        match self {
            TxnState::Empty => "Empty",
            TxnState::Ongoing => "Ongoing",
            TxnState::PrepareCommit => "PrepareCommit",
            TxnState::PrepareAbort => "PrepareAbort",
            TxnState::CompleteCommit => "CompleteCommit",
            TxnState::CompleteAbort => "CompleteAbort",
            TxnState::PrepareEpochFence => "PrepareEpochFence",
        }
    }

    /// Whether a transaction may move from `self` to `next` (Kafka's
    /// `validPreviousStates`, read the other way).
    pub fn may_become(self, next: TxnState) -> bool {
        use TxnState::*;
        match next {
            Empty => matches!(self, Empty | CompleteCommit | CompleteAbort),
            Ongoing => matches!(self, Empty | Ongoing | CompleteCommit | CompleteAbort),
            PrepareCommit => self == Ongoing,
            PrepareAbort => matches!(self, Ongoing | PrepareEpochFence),
            CompleteCommit => self == PrepareCommit,
            CompleteAbort => self == PrepareAbort,
            PrepareEpochFence => self == Ongoing,
        }
    }

    /// No transaction is open: a new one may start.
    fn is_settled(self) -> bool {
        matches!(
            self,
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
        )
    }
}

/// Why a transaction call is refused; each is one Kafka error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TxnRefusal {
    /// INVALID_TRANSACTION_TIMEOUT.
    #[error("transaction timeout {timeout_ms} ms is not within 1 and {max_ms}")]
    InvalidTimeout { timeout_ms: i64, max_ms: u32 },
    /// INVALID_PRODUCER_ID_MAPPING: the id has no producer, or another.
    #[error("producer id {producer_id} is not the transactional id's")]
    InvalidProducerIdMapping { producer_id: i64 },
    /// PRODUCER_FENCED: a newer producer has the id.
    #[error("producer epoch {epoch} is fenced: the transactional id is at epoch {current}")]
    ProducerFenced { epoch: i16, current: i16 },
    /// CONCURRENT_TRANSACTIONS (retriable): a transition is being made
    /// durable, or the previous transaction is still ending.
    #[error("the transactional id's previous transaction is still ending")]
    Concurrent,
    /// INVALID_TXN_STATE: the call does not fit the transaction's state.
    #[error("cannot {what} a transaction in state {state}")]
    InvalidState {
        what: &'static str,
        state: &'static str,
    },
    /// INVALID_REQUEST: an empty, too long or too wide request.
    #[error("{reason}")]
    InvalidRequest { reason: String },
    /// A limit of what the coordinator keeps.
    #[error("the coordinator keeps at most {max} {what}")]
    Limit { what: &'static str, max: usize },
}

/// A partition a transaction wrote to.
pub type TxnPartition = (String, u32);

/// A consumer offset a transaction commits (TxnOffsetCommit): group,
/// topic, partition.
pub type TxnOffsetKey = (String, String, u32);

/// The offset committed for a [`TxnOffsetKey`] if the transaction
/// commits (Kafka's KIP-98 "consume-transform-produce").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnOffset {
    pub offset: u64,
    pub leader_epoch: Option<i32>,
    pub metadata: String,
}

/// The offsets of an open transaction.
pub type TxnOffsets = std::collections::BTreeMap<TxnOffsetKey, TxnOffset>;

/// One transactional id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnMetadata {
    pub producer_id: i64,
    pub epoch: i16,
    /// The producer id and epoch before the last InitProducerId, so its
    /// retry (the answer was lost) is recognised (KIP-360).
    pub last: Option<(i64, i16)>,
    pub timeout_ms: u32,
    pub state: TxnState,
    /// The partitions the open (or ending) transaction wrote to.
    pub partitions: BTreeSet<TxnPartition>,
    /// The consumer offsets it commits if it commits.
    pub offsets: TxnOffsets,
    /// When the open transaction began (its first AddPartitions).
    pub started_ms: Option<u64>,
    pub updated_ms: u64,
    /// A transition being made durable.
    pub pending: Option<Transition>,
}

/// A change of one transactional id, made durable before it is applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transition {
    pub transactional_id: String,
    pub producer_id: i64,
    pub epoch: i16,
    pub last: Option<(i64, i16)>,
    pub timeout_ms: u32,
    pub state: TxnState,
    pub partitions: BTreeSet<TxnPartition>,
    pub offsets: TxnOffsets,
    pub started_ms: Option<u64>,
    pub at_ms: u64,
}

impl Transition {
    /// The end of a transaction whose markers this transition writes:
    /// `Some(true)` COMMIT, `Some(false)` ABORT.
    pub fn marker(&self) -> Option<bool> {
        match self.state {
            TxnState::PrepareCommit => Some(true),
            TxnState::PrepareAbort => Some(false),
            _ => None,
        }
    }
}

/// What InitProducerId comes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InitOutcome {
    /// Make `transition` durable, apply it, answer its id and epoch.
    Ready(Transition),
    /// A transaction is open: abort it first (make `transition` durable,
    /// write its ABORT markers, complete it), and answer
    /// CONCURRENT_TRANSACTIONS; the producer retries.
    AbortFirst(Transition),
    /// The retry of an InitProducerId already made (its answer was lost):
    /// answer this id and epoch again; nothing changes.
    Same { producer_id: i64, epoch: i16 },
}

/// Every transactional id the coordinator knows.
#[derive(Debug, Default)]
pub struct Transactions {
    ids: BTreeMap<String, TxnMetadata>,
}

impl Transactions {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn get(&self, transactional_id: &str) -> Option<&TxnMetadata> {
        self.ids.get(transactional_id)
    }

    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Every transactional id with its state, for ListTransactions.
    pub fn list(&self) -> impl Iterator<Item = (&str, &TxnMetadata)> {
        self.ids.iter().map(|(id, m)| (id.as_str(), m))
    }

    /// InitProducerId with a transactional id. `expected` is the
    /// client's producer id and epoch (v3+, KIP-360), if it has one;
    /// `allocate` hands out a new producer id.
    pub fn init_producer_id(
        &mut self,
        transactional_id: &str,
        timeout_ms: i64,
        expected: Option<(i64, i16)>,
        now_ms: u64,
        allocate: &mut dyn FnMut() -> Result<i64, TxnRefusal>,
    ) -> Result<InitOutcome, TxnRefusal> {
        check_id(transactional_id)?;
        let timeout_ms = match u32::try_from(timeout_ms) {
            Ok(t) if (1..=TRANSACTION_MAX_TIMEOUT_MS).contains(&t) => t,
            _ => {
                return Err(TxnRefusal::InvalidTimeout {
                    timeout_ms,
                    max_ms: TRANSACTION_MAX_TIMEOUT_MS,
                })
            }
        };
        let Some(m) = self.ids.get(transactional_id) else {
            if self.ids.len() >= TRANSACTIONAL_IDS_MAX {
                return Err(TxnRefusal::Limit {
                    what: "transactional ids",
                    max: TRANSACTIONAL_IDS_MAX,
                });
            }
            // A producer that names an id this coordinator never gave it
            // for this transactional id is another's (Kafka: the same).
            if let Some((id, _)) = expected.filter(|(id, _)| *id >= 0) {
                return Err(TxnRefusal::InvalidProducerIdMapping { producer_id: id });
            }
            let producer_id = allocate()?;
            let t = Transition {
                transactional_id: transactional_id.to_owned(),
                producer_id,
                epoch: 0,
                last: None,
                timeout_ms,
                state: TxnState::Empty,
                partitions: BTreeSet::new(),
                offsets: TxnOffsets::new(),
                started_ms: None,
                at_ms: now_ms,
            };
            self.ids.insert(
                transactional_id.to_owned(),
                TxnMetadata {
                    producer_id,
                    epoch: -1,
                    last: None,
                    timeout_ms,
                    state: TxnState::Empty,
                    partitions: BTreeSet::new(),
                    offsets: TxnOffsets::new(),
                    started_ms: None,
                    updated_ms: now_ms,
                    pending: Some(t.clone()),
                },
            );
            return Ok(InitOutcome::Ready(t));
        };
        if m.pending.is_some() {
            return Err(TxnRefusal::Concurrent);
        }
        if let Some(expected) = expected.filter(|(id, _)| *id >= 0) {
            let current = (m.producer_id, m.epoch);
            if expected != current {
                // The retry of an InitProducerId whose answer was lost:
                // the same answer, nothing bumped again.
                if m.last == Some(expected) && m.state.is_settled() {
                    return Ok(InitOutcome::Same {
                        producer_id: m.producer_id,
                        epoch: m.epoch,
                    });
                }
                return Err(if expected.0 == m.producer_id {
                    TxnRefusal::ProducerFenced {
                        epoch: expected.1,
                        current: m.epoch,
                    }
                } else {
                    TxnRefusal::InvalidProducerIdMapping {
                        producer_id: expected.0,
                    }
                });
            }
        }
        match m.state {
            TxnState::PrepareCommit | TxnState::PrepareAbort | TxnState::PrepareEpochFence => {
                Err(TxnRefusal::Concurrent)
            }
            TxnState::Ongoing => Ok(InitOutcome::AbortFirst(
                self.fence_and_abort(transactional_id, now_ms),
            )),
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort => {
                let (producer_id, epoch) = if m.epoch >= EPOCH_MAX {
                    (allocate()?, 0)
                } else {
                    (m.producer_id, m.epoch + 1)
                };
                let t = Transition {
                    transactional_id: transactional_id.to_owned(),
                    producer_id,
                    epoch,
                    last: Some((m.producer_id, m.epoch)),
                    timeout_ms,
                    state: TxnState::Empty,
                    partitions: BTreeSet::new(),
                    offsets: TxnOffsets::new(),
                    started_ms: None,
                    at_ms: now_ms,
                };
                Ok(InitOutcome::Ready(self.begin(transactional_id, t)))
            }
        }
    }

    /// AddPartitionsToTxn (and AddOffsetsToTxn, whose partition is the
    /// group's `__consumer_offsets` one): the transaction is open from
    /// here. `None` when every partition is in it already (nothing to
    /// make durable).
    pub fn add_partitions(
        &mut self,
        transactional_id: &str,
        producer_id: i64,
        epoch: i16,
        partitions: &[TxnPartition],
        now_ms: u64,
    ) -> Result<Option<Transition>, TxnRefusal> {
        if partitions.is_empty() {
            return Err(TxnRefusal::InvalidRequest {
                reason: "no partitions to add".into(),
            });
        }
        let m = self.producer(transactional_id, producer_id, epoch)?;
        match m.state {
            TxnState::PrepareCommit | TxnState::PrepareAbort | TxnState::PrepareEpochFence => {
                return Err(TxnRefusal::Concurrent)
            }
            TxnState::Ongoing if partitions.iter().all(|p| m.partitions.contains(p)) => {
                return Ok(None)
            }
            _ => {}
        }
        let mut next = if m.state == TxnState::Ongoing {
            m.partitions.clone()
        } else {
            BTreeSet::new()
        };
        next.extend(partitions.iter().cloned());
        if next.len() > PARTITIONS_PER_TRANSACTION_MAX {
            return Err(TxnRefusal::Limit {
                what: "partitions in one transaction",
                max: PARTITIONS_PER_TRANSACTION_MAX,
            });
        }
        let t = Transition {
            transactional_id: transactional_id.to_owned(),
            producer_id,
            epoch,
            last: m.last,
            timeout_ms: m.timeout_ms,
            state: TxnState::Ongoing,
            partitions: next,
            offsets: if m.state == TxnState::Ongoing {
                m.offsets.clone()
            } else {
                TxnOffsets::new()
            },
            started_ms: if m.state == TxnState::Ongoing {
                m.started_ms
            } else {
                Some(now_ms)
            },
            at_ms: now_ms,
        };
        Ok(Some(self.begin(transactional_id, t)))
    }

    /// TxnOffsetCommit: `offsets` join the open transaction, committed
    /// with it (and dropped with an abort); a later offset of the same
    /// key replaces an earlier one. `None` when nothing changes.
    pub fn add_offsets(
        &mut self,
        transactional_id: &str,
        producer_id: i64,
        epoch: i16,
        offsets: Vec<(TxnOffsetKey, TxnOffset)>,
        now_ms: u64,
    ) -> Result<Option<Transition>, TxnRefusal> {
        let m = self.producer(transactional_id, producer_id, epoch)?;
        if m.state != TxnState::Ongoing {
            return Err(TxnRefusal::InvalidState {
                what: "commit offsets in",
                state: m.state.name(),
            });
        }
        let mut next = m.offsets.clone();
        next.extend(offsets);
        if next == m.offsets {
            return Ok(None);
        }
        if next.len() > PARTITIONS_PER_TRANSACTION_MAX {
            return Err(TxnRefusal::Limit {
                what: "offsets in one transaction",
                max: PARTITIONS_PER_TRANSACTION_MAX,
            });
        }
        let t = Transition {
            offsets: next,
            at_ms: now_ms,
            ..self.as_transition(transactional_id, m)
        };
        Ok(Some(self.begin(transactional_id, t)))
    }

    /// EndTxn: `Ok(Some(t))` with `t` a PrepareCommit or PrepareAbort to
    /// make durable, then its markers to write ([`Transition::marker`]),
    /// then [`Transactions::finish`]; `Ok(None)` for the retry of an end
    /// already made (the answer was lost).
    pub fn end(
        &mut self,
        transactional_id: &str,
        producer_id: i64,
        epoch: i16,
        commit: bool,
        now_ms: u64,
    ) -> Result<Option<Transition>, TxnRefusal> {
        let m = self.producer(transactional_id, producer_id, epoch)?;
        let what = if commit { "commit" } else { "abort" };
        let invalid = |state: TxnState| TxnRefusal::InvalidState {
            what,
            state: state.name(),
        };
        match (m.state, commit) {
            (TxnState::Ongoing, _) => {
                let state = if commit {
                    TxnState::PrepareCommit
                } else {
                    TxnState::PrepareAbort
                };
                let t = Transition {
                    state,
                    at_ms: now_ms,
                    ..self.as_transition(transactional_id, m)
                };
                Ok(Some(self.begin(transactional_id, t)))
            }
            (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) => Ok(None),
            (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => {
                Err(TxnRefusal::Concurrent)
            }
            (state, _) => Err(invalid(state)),
        }
    }

    /// After a PrepareCommit or PrepareAbort was made durable and applied
    /// and its markers written: the transition to CompleteCommit or
    /// CompleteAbort, to make durable and apply in turn.
    pub fn finish(&mut self, transactional_id: &str, now_ms: u64) -> Option<Transition> {
        let m = self.ids.get(transactional_id)?;
        if m.pending.is_some() {
            return None;
        }
        let state = match m.state {
            TxnState::PrepareCommit => TxnState::CompleteCommit,
            TxnState::PrepareAbort => TxnState::CompleteAbort,
            _ => return None,
        };
        let t = Transition {
            state,
            partitions: BTreeSet::new(),
            offsets: TxnOffsets::new(),
            started_ms: None,
            at_ms: now_ms,
            ..self.as_transition(transactional_id, m)
        };
        Some(self.begin(transactional_id, t))
    }

    /// The open transactions past their timeout at `now_ms`, each fenced
    /// and moved to abort: the PrepareAbort transitions to make durable,
    /// then their markers, then [`Transactions::finish`].
    pub fn expire(&mut self, now_ms: u64) -> Vec<Transition> {
        let due: Vec<String> = self
            .ids
            .iter()
            .filter(|(_, m)| {
                m.pending.is_none()
                    && m.state == TxnState::Ongoing
                    && m.started_ms
                        .is_some_and(|s| now_ms.saturating_sub(s) > u64::from(m.timeout_ms))
            })
            .map(|(id, _)| id.clone())
            .collect();
        due.iter()
            .map(|id| self.fence_and_abort(id, now_ms))
            .collect()
    }

    /// `transition`, taken from this coordinator, is durable: apply it.
    pub fn complete(&mut self, transition: &Transition) {
        let Some(m) = self.ids.get_mut(&transition.transactional_id) else {
            return;
        };
        if m.pending.as_ref() != Some(transition) {
            return;
        }
        debug_assert!(
            m.state.may_become(transition.state) || m.epoch < 0,
            "{:?} -> {:?}",
            m.state,
            transition.state
        );
        m.pending = None;
        m.producer_id = transition.producer_id;
        m.epoch = transition.epoch;
        m.last = transition.last;
        m.timeout_ms = transition.timeout_ms;
        m.state = transition.state;
        m.partitions = transition.partitions.clone();
        m.offsets = transition.offsets.clone();
        m.started_ms = transition.started_ms;
        m.updated_ms = transition.at_ms;
    }

    /// `transition` could not be made durable: forget it (a new id's
    /// entry goes with it), so the client's retry starts again.
    pub fn abandon(&mut self, transition: &Transition) {
        let Some(m) = self.ids.get_mut(&transition.transactional_id) else {
            return;
        };
        if m.pending.as_ref() != Some(transition) {
            return;
        }
        if m.epoch < 0 {
            self.ids.remove(&transition.transactional_id);
        } else {
            m.pending = None;
        }
    }

    /// The metadata of `transactional_id` for a call by `producer_id` at
    /// `epoch`: unknown, another producer's or a pending transition's id
    /// refused as Kafka refuses them.
    fn producer(
        &self,
        transactional_id: &str,
        producer_id: i64,
        epoch: i16,
    ) -> Result<&TxnMetadata, TxnRefusal> {
        let m = self
            .ids
            .get(transactional_id)
            .filter(|m| m.epoch >= 0 && m.producer_id == producer_id)
            .ok_or(TxnRefusal::InvalidProducerIdMapping { producer_id })?;
        if m.epoch != epoch {
            return Err(TxnRefusal::ProducerFenced {
                epoch,
                current: m.epoch,
            });
        }
        if m.pending.is_some() {
            return Err(TxnRefusal::Concurrent);
        }
        Ok(m)
    }

    /// The open transaction of `transactional_id` aborted under a bumped
    /// epoch, so its producer is fenced (Kafka's PrepareEpochFence, then
    /// PrepareAbort; both made durable as the one PrepareAbort here).
    fn fence_and_abort(&mut self, transactional_id: &str, now_ms: u64) -> Transition {
        let m = &self.ids[transactional_id];
        debug_assert!(m.state.may_become(TxnState::PrepareEpochFence));
        // One past the last epoch an InitProducerId gives is still an
        // epoch: the fence always bumps, and the next InitProducerId then
        // takes a new producer id.
        let (producer_id, epoch) = (m.producer_id, m.epoch.saturating_add(1));
        let t = Transition {
            producer_id,
            epoch,
            state: TxnState::PrepareAbort,
            at_ms: now_ms,
            ..self.as_transition(transactional_id, m)
        };
        self.begin(transactional_id, t)
    }

    /// `transactional_id` as it is, as a transition (no change): what a
    /// retried end carries out again. Panics if the id is unknown.
    pub fn snapshot(&self, transactional_id: &str) -> Transition {
        self.as_transition(transactional_id, &self.ids[transactional_id])
    }

    /// The transactional id as it is, as a transition (no change).
    fn as_transition(&self, transactional_id: &str, m: &TxnMetadata) -> Transition {
        Transition {
            transactional_id: transactional_id.to_owned(),
            producer_id: m.producer_id,
            epoch: m.epoch,
            last: m.last,
            timeout_ms: m.timeout_ms,
            state: m.state,
            partitions: m.partitions.clone(),
            offsets: m.offsets.clone(),
            started_ms: m.started_ms,
            at_ms: m.updated_ms,
        }
    }

    /// Marks `t` pending on its id and hands it out.
    fn begin(&mut self, transactional_id: &str, t: Transition) -> Transition {
        if let Some(m) = self.ids.get_mut(transactional_id) {
            m.pending = Some(t.clone());
        }
        t
    }
}

fn check_id(transactional_id: &str) -> Result<(), TxnRefusal> {
    if transactional_id.is_empty() || transactional_id.len() > TRANSACTIONAL_ID_MAX_BYTES {
        return Err(TxnRefusal::InvalidRequest {
            reason: format!(
                "a transactional id is 1 to {TRANSACTIONAL_ID_MAX_BYTES} bytes, not {}",
                transactional_id.len()
            ),
        });
    }
    Ok(())
}
