//! The HTTP consumer instances' calls behind the door (API.md's
//! "Consumer instances"): create and delete, subscribe, assign, seek,
//! commit, and the records call with its wait.
//!
//! The manager ([`Consumers`]) is the HTTP API's: it starts it with the
//! broker, with its `http.consumer_*` settings, and hands it to each call
//! in a [`ConsumerInstance`]. What runs where is decided here: every
//! instance call runs on the blocking pool (it takes the group's lock,
//! which a call reading a compacted partition with `pread` or appending a
//! commit holds), and the records call's wait is awaited without a
//! thread.
//!
//! The records call waits here and not in the one long-poll of
//! `crate::long_poll`, though in the same order (read-your-writes, then
//! the deadline or shutdown, then the listeners) and with its pieces
//! (`any_of`, `shutdown`): its shape does not fit a
//! [`FetchRound`](crate::long_poll::FetchRound). A try whose answer is taken moves the
//! instance's positions, so the manager must know before it reads
//! whether this try is the last (then it answers whatever it read, even
//! below `fetch.min.bytes`); a short try consumes nothing and has no
//! answer to give back. And what it waits on are not only partitions
//! from an offset: the group's listener (a rebalance) and the instance's
//! own (its deletion) wake it too, so the manager hands back listeners,
//! registered under its lock before its re-check.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use tidelog_security::acl::{Operation, Resource};

use super::Door;
use crate::consumers::{Consumers, InstanceConfig, Poll, PolledRecords, SeekTo, Subscription};
use crate::coordinator::TopicPartition;
use crate::error::BrokerError;
use crate::groups::{CommittedOffset, OffsetCommit};
use crate::long_poll::{any_of, shutdown};
use crate::principal::Caller;
use crate::visibility::VISIBILITY_WAIT;

/// The consumer instance a call is for: the manager that holds it, its
/// group and its name.
#[derive(Debug, Clone)]
pub struct ConsumerInstance {
    pub consumers: Arc<Consumers>,
    pub group: String,
    pub instance: String,
}

/// A records call's answer, as the front-end makes it (HTTP renders JSON
/// within its answer budget).
pub trait RecordsAnswer {
    type Answer: Send + 'static;
    type Error: From<BrokerError> + Send + 'static;

    /// The payload bytes the next try may read (smaller while the answer
    /// budget is short).
    fn max_bytes(&mut self) -> Result<usize, Self::Error>;

    /// Turns a try's records into the answer. Run on the blocking pool
    /// under the group's lock, before the positions move: if it fails,
    /// nothing is consumed.
    fn render(
        &self,
    ) -> impl FnOnce(&[PolledRecords]) -> Result<Self::Answer, Self::Error> + Send + 'static;

    /// The call starts (`true`) or stops (`false`) waiting for records:
    /// for a gauge of waiting fetches. Nothing by default.
    fn waiting(&mut self, _waiting: bool) {}
}

impl Door {
    /// Creates an instance in `group` of `consumers`; its name (made up
    /// when `config.name` is `None`).
    pub async fn create_consumer(
        &self,
        consumers: &Arc<Consumers>,
        group: &str,
        config: InstanceConfig,
    ) -> Result<String, BrokerError> {
        self.allow(Operation::Read, Resource::group(group))?;
        let (consumers, group) = (Arc::clone(consumers), group.to_owned());
        crate::blocking::run(move || consumers.create(&group, config)).await
    }

    /// Deletes the instance (an auto-commit instance commits what it
    /// returned first); its partitions go to the group's others.
    pub async fn delete_consumer(&self, at: &ConsumerInstance) -> Result<(), BrokerError> {
        self.on_instance(at, |c, g, i| c.delete(g, i)).await
    }

    /// The instance's settings (its format, its records calls' default
    /// timeout).
    pub async fn consumer_config(
        &self,
        at: &ConsumerInstance,
    ) -> Result<InstanceConfig, BrokerError> {
        self.on_instance(at, |c, g, i| c.instance_config(g, i))
            .await
    }

    /// Subscribes to topics or a pattern, replacing an earlier
    /// subscription; the group rebalances within the call.
    pub async fn subscribe(
        &self,
        at: &ConsumerInstance,
        subscription: Subscription,
    ) -> Result<(), BrokerError> {
        if let Subscription::Topics(topics) = &subscription {
            self.allow_topics(topics.iter().map(String::as_str))?;
        }
        let reader = Caller {
            principal: self.who.clone(),
            host: self.host,
        };
        self.on_instance(at, move |c, g, i| c.subscribe(g, i, subscription, &reader))
            .await
    }

    /// The topics the instance is subscribed to.
    pub async fn subscription(&self, at: &ConsumerInstance) -> Result<Vec<String>, BrokerError> {
        self.on_instance(at, |c, g, i| c.subscription(g, i)).await
    }

    /// Ends the instance's subscription.
    pub async fn unsubscribe(&self, at: &ConsumerInstance) -> Result<(), BrokerError> {
        self.on_instance(at, |c, g, i| c.unsubscribe(g, i)).await
    }

    /// Assigns partitions by hand (no group membership).
    pub async fn assign(
        &self,
        at: &ConsumerInstance,
        partitions: Vec<TopicPartition>,
    ) -> Result<(), BrokerError> {
        self.allow_topics(partitions.iter().map(|p| p.topic.as_str()))?;
        self.on_instance(at, move |c, g, i| c.assign(g, i, partitions))
            .await
    }

    /// The partitions the instance holds.
    pub async fn assignments(
        &self,
        at: &ConsumerInstance,
    ) -> Result<Vec<TopicPartition>, BrokerError> {
        self.on_instance(at, |c, g, i| c.assignments(g, i)).await
    }

    /// Commits `offsets`, or with `None` what the instance returned so far.
    pub async fn commit_consumer(
        &self,
        at: &ConsumerInstance,
        offsets: Option<Vec<OffsetCommit>>,
    ) -> Result<(), BrokerError> {
        self.broker.check_master()?;
        if let Some(offsets) = &offsets {
            self.allow_topics(offsets.iter().map(|o| o.topic.as_str()))?;
        }
        self.on_instance(at, move |c, g, i| c.commit(g, i, offsets))
            .await
    }

    /// The group's committed offsets of `partitions`.
    pub async fn consumer_committed(
        &self,
        at: &ConsumerInstance,
        partitions: Vec<TopicPartition>,
    ) -> Result<Vec<CommittedOffset>, BrokerError> {
        self.allow_topics(partitions.iter().map(|p| p.topic.as_str()))?;
        self.on_instance(at, move |c, g, i| c.committed(g, i, partitions))
            .await
    }

    /// Moves held partitions' positions to the given offsets.
    pub async fn seek(
        &self,
        at: &ConsumerInstance,
        offsets: Vec<(TopicPartition, u64)>,
    ) -> Result<(), BrokerError> {
        self.allow_topics(offsets.iter().map(|(p, _)| p.topic.as_str()))?;
        self.on_instance(at, move |c, g, i| c.seek(g, i, offsets))
            .await
    }

    /// Moves held partitions' positions to their beginning or end.
    pub async fn seek_to(
        &self,
        at: &ConsumerInstance,
        partitions: Vec<TopicPartition>,
        to: SeekTo,
    ) -> Result<(), BrokerError> {
        self.allow_topics(partitions.iter().map(|p| p.topic.as_str()))?;
        self.on_instance(at, move |c, g, i| c.seek_to(g, i, partitions, to))
            .await
    }

    /// A records call: tries the held partitions (`Consumers::poll`, on
    /// the blocking pool) until it has records (at least
    /// `fetch.min.bytes`), `timeout` passes or `stop` turns true
    /// (shutdown); the try after that is the last and answers what there
    /// is. Between tries it awaits, in this order: every record
    /// acknowledged before the call began becoming visible (at most
    /// [`VISIBILITY_WAIT`]; until then no try is the last, also with a
    /// timeout of 0), then any listener the try handed back (a held
    /// partition's record, a rebalance, the instance's deletion), the
    /// deadline or shutdown. No polling loop.
    pub async fn poll_records<A: RecordsAnswer + Send>(
        &self,
        at: &ConsumerInstance,
        answer: &mut A,
        timeout: Duration,
        mut stop: watch::Receiver<bool>,
    ) -> Result<A::Answer, A::Error> {
        // READ on every topic held, at every call, as a Kafka Fetch checks
        // it: an ACL revoked since the subscription takes effect here.
        // Only where ACLs decide: otherwise every check passes, and the
        // lookup of the holdings would cost each call a blocking-pool hop.
        if self.broker.access.config().authorization {
            let held = self.assignments(at).await?;
            self.allow_topics(held.iter().map(|p| p.topic.as_str()))?;
        } else {
            self.allow(Operation::Read, Resource::group(&at.group))?;
        }
        let deadline = Instant::now() + timeout;
        let broker = self.broker();
        let point = broker.acknowledged();
        let mut unseen = (!broker.is_visible(point)).then_some(point);
        loop {
            let last = unseen.is_none() && (Instant::now() >= deadline || *stop.borrow());
            let max_bytes = answer.max_bytes()?;
            let render = answer.render();
            let at_ = at.clone();
            let polled = crate::blocking::run(move || {
                let ConsumerInstance {
                    consumers,
                    group,
                    instance,
                } = at_;
                Ok(consumers.poll(&group, &instance, max_bytes, last, render))
            })
            .await
            .map_err(A::Error::from)??;
            let listeners = match polled {
                Poll::Records(answered) => return Ok(answered),
                Poll::Wait(listeners) => listeners,
            };
            if let Some(point) = unseen.take() {
                tokio::select! {
                    _ = tokio::time::timeout(VISIBILITY_WAIT, broker.visible(point)) => {}
                    _ = shutdown(&mut stop) => {}
                }
                continue;
            }
            answer.waiting(true);
            tokio::select! {
                _ = any_of(listeners) => {}
                _ = tokio::time::sleep_until(deadline) => {}
                _ = shutdown(&mut stop) => {}
            }
            answer.waiting(false);
        }
    }
}

impl Door {
    /// Runs a manager call on the instance `at` on the blocking pool,
    /// once READ on its group is allowed (every instance call is a
    /// group member's, as Kafka's consumer calls are).
    fn on_instance<T: Send + 'static>(
        &self,
        at: &ConsumerInstance,
        f: impl FnOnce(&Consumers, &str, &str) -> Result<T, BrokerError> + Send + 'static,
    ) -> impl Future<Output = Result<T, BrokerError>> {
        let allowed = self.allow(Operation::Read, Resource::group(&at.group));
        let at = at.clone();
        async move {
            allowed?;
            crate::blocking::run(move || f(&at.consumers, &at.group, &at.instance)).await
        }
    }

    /// READ on each of `topics`.
    fn allow_topics<'t>(&self, topics: impl Iterator<Item = &'t str>) -> Result<(), BrokerError> {
        topics
            .into_iter()
            .try_for_each(|topic| self.allow(Operation::Read, Resource::topic(topic)))
    }
}

#[cfg(test)]
#[path = "consumers_tests.rs"]
mod tests;
