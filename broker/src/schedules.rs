//! The broker's periodic work, each on a named thread so a stack dump or
//! `top -H` tells who is who:
//!
//! * `tidelog-offset-expiry`: [`Broker::expire_offsets`] every
//!   [`OFFSETS_EXPIRY_CHECK_MS`] (offsets of groups without members, after
//!   `groups.offsets_retention_minutes`), the first pass one period after
//!   start.
//! * `tidelog-transactions`: [`Broker::txn_tick`] every
//!   [`TXN_TICK_MS`](crate::transactions::service::TXN_TICK_MS):
//!   transactions past their timeout aborted, unfinished ends finished,
//!   expired transactional ids forgotten.
//! * `tidelog-tiering`, only with a remote tier: the uploader's round
//!   (`Broker::tiering_round`) at once and then every
//!   `tiered.upload_interval_ms`.
//!
//! Invariants:
//! - A thread holds the broker weakly and upgrades it only for one pass,
//!   so the node's shutdown (taking the broker back once nobody holds it)
//!   is never held up by a sleeping thread, and a thread whose broker is
//!   gone ends.
//! - Both end when `stop` turns `true` (or its sender is gone): a sleep is
//!   cut short, and a tiering round in flight is dropped (uploads are
//!   idempotent and the manifest lists an object only once it is
//!   durable); an expiry pass, which is short and blocking, finishes.
//!   [`Schedules::join`] then returns once both have ended.
//! - A failed pass is logged and the schedule goes on; a pass that panics
//!   is logged as failed and the schedule goes on too.
//! - The tiering round is async: its thread drives it with the runtime
//!   handle it was given (`Handle::block_on`), so the round's I/O and the
//!   tasks it spawns belong to the server's runtime, as when it ran as a
//!   task there.

use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::sync::watch;

use crate::groups::OFFSETS_EXPIRY_CHECK_MS;
use crate::Broker;

/// The running schedule threads ([`start`]).
#[derive(Debug, Default)]
pub struct Schedules {
    threads: Vec<JoinHandle<()>>,
}

impl Schedules {
    /// Waits until every schedule thread has ended: call after `stop`
    /// turned `true`. Blocking (at most an expiry pass).
    pub fn join(self) {
        for thread in self.threads {
            let name = thread.thread().name().unwrap_or("schedule").to_owned();
            if thread.join().is_err() {
                tracing::error!(thread = %name, "schedule thread panicked");
            }
        }
    }
}

/// Starts the schedules of `broker` (module doc) until `stop` turns
/// `true`. `runtime` drives the tiering round's I/O. A thread that cannot
/// be started is logged and left out: the server serves without it.
pub fn start(broker: &Arc<Broker>, runtime: Handle, stop: watch::Receiver<bool>) -> Schedules {
    let mut schedules = Schedules::default();
    let expiry = {
        let broker = Arc::downgrade(broker);
        let runtime = runtime.clone();
        let stop = stop.clone();
        spawn("tidelog-offset-expiry", move || {
            expire_offsets_periodically(broker, runtime, stop)
        })
    };
    schedules.threads.extend(expiry);
    let txns = {
        let broker = Arc::downgrade(broker);
        let runtime = runtime.clone();
        let stop = stop.clone();
        spawn("tidelog-transactions", move || {
            txn_tick_periodically(broker, runtime, stop)
        })
    };
    schedules.threads.extend(txns);
    if broker.tiering.is_some() {
        let interval_ms = broker.config.tiered.upload_interval_ms;
        let broker = Arc::downgrade(broker);
        let tiering = spawn("tidelog-tiering", move || {
            tier_periodically(broker, runtime, stop, interval_ms)
        });
        schedules.threads.extend(tiering);
    }
    schedules
}

fn spawn(name: &str, body: impl FnOnce() + Send + 'static) -> Option<JoinHandle<()>> {
    match std::thread::Builder::new().name(name.into()).spawn(body) {
        Ok(thread) => Some(thread),
        Err(e) => {
            tracing::error!(thread = name, error = %e, "cannot start a schedule thread");
            None
        }
    }
}

/// Sleeps `period` unless `stop` turns `true` first; `false` then.
fn sleep_unless_stopped(
    runtime: &Handle,
    stop: &mut watch::Receiver<bool>,
    period: Duration,
) -> bool {
    runtime.block_on(async {
        tokio::select! {
            _ = tokio::time::sleep(period) => !*stop.borrow(),
            _ = stop.changed() => false,
        }
    })
}

/// Runs `Broker::expire_offsets` every `OFFSETS_EXPIRY_CHECK_MS` until
/// `stop`. It holds the broker only during a pass.
fn expire_offsets_periodically(
    broker: Weak<Broker>,
    runtime: Handle,
    mut stop: watch::Receiver<bool>,
) {
    let period = Duration::from_millis(OFFSETS_EXPIRY_CHECK_MS);
    loop {
        if !sleep_unless_stopped(&runtime, &mut stop, period) {
            return;
        }
        let Some(broker) = broker.upgrade() else {
            return;
        };
        match std::panic::catch_unwind(AssertUnwindSafe(|| broker.expire_offsets())) {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => tracing::error!(error = %e, "committed offsets expiry failed"),
            Err(_) => tracing::error!("committed offsets expiry task failed: it panicked"),
        }
    }
}

/// Runs `Broker::txn_tick` every `TXN_TICK_MS` until `stop`, holding the
/// broker only during a tick.
fn txn_tick_periodically(broker: Weak<Broker>, runtime: Handle, mut stop: watch::Receiver<bool>) {
    let period = Duration::from_millis(crate::transactions::service::TXN_TICK_MS);
    loop {
        if !sleep_unless_stopped(&runtime, &mut stop, period) {
            return;
        }
        let Some(broker) = broker.upgrade() else {
            return;
        };
        match std::panic::catch_unwind(AssertUnwindSafe(|| broker.txn_tick())) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::error!(error = %e, "transaction coordinator tick failed"),
            Err(_) => tracing::error!("transaction coordinator tick failed: it panicked"),
        }
    }
}

/// Runs the tiered-storage uploader's round (`Broker::tiering_round`) at
/// once and then every `interval_ms` until `stop`, holding the broker only
/// during a round.
fn tier_periodically(
    broker: Weak<Broker>,
    runtime: Handle,
    mut stop: watch::Receiver<bool>,
    interval_ms: u64,
) {
    let period = Duration::from_millis(interval_ms.max(1));
    loop {
        if *stop.borrow() {
            return;
        }
        let Some(ready) = broker.upgrade() else {
            return;
        };
        // A partition's failure is logged and backed off inside the
        // round; an error here is the round's own (a bug). Shutdown drops
        // a round in flight (module doc).
        let stopped = runtime.block_on(async {
            tokio::select! {
                round = ready.tiering_round(None) => {
                    if let Err(e) = round {
                        tracing::error!(error = %e, "tiering round failed");
                    }
                    false
                }
                _ = stop.changed() => true,
            }
        });
        drop(ready);
        if stopped || !sleep_unless_stopped(&runtime, &mut stop, period) {
            return;
        }
    }
}

#[cfg(test)]
#[path = "schedules_tests.rs"]
mod tests;
