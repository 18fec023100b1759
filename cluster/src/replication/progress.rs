//! The master's view of its replicas: how far each confirmed its copy,
//! which of them are in sync, and the high watermark that gives (what
//! every member of the in-sync set holds, durable as the flush mode
//! promises). Pure state behind one mutex: the replication stream feeds
//! it, the acknowledgement path and the readers' cap follow its
//! watermark, and the node runtime turns [`Progress::wanted_insync`] into
//! etcd's in-sync set (only the master changes it, with a compare on its
//! term) before [`Progress::set_insync`] makes it count here.
//!
//! In sync, as Kafka's `replica.lag.time.max.ms`: a replica is caught up
//! at instant T once it confirmed a position the master's log had reached
//! at T (a mark taken at each confirmation, met by a later one), or now
//! when it holds everything the master holds. One not caught up within
//! `lag_max` leaves the set; one caught up and holding the watermark
//! joins it. So a replica that keeps up under load stays, though it is
//! always a few bytes behind, and an idle one that holds everything
//! stays too.
//!
//! Invariants: the watermark never passes the master's own durable end
//! nor any member's confirmation, and never goes down (a member leaving
//! can only raise it); a replica's confirmation never goes down (a lower
//! one, from a reconnection that cut nothing, is ignored).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::sync::watch;

/// The high watermark and the in-sync set's size it was computed over
/// (the master included).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Watermark {
    pub high_watermark: u64,
    pub insync: usize,
}

/// What one replica confirmed.
#[derive(Clone, Copy, Debug)]
struct Replica {
    confirmed: u64,
    caught_up_at: Instant,
    /// The master's end when the last confirmation came, and when: met by
    /// a later confirmation at or past it, it makes that instant caught up.
    mark: Option<(u64, Instant)>,
    connected: bool,
}

impl Replica {
    fn new(now: Instant) -> Replica {
        Replica {
            confirmed: 0,
            caught_up_at: now,
            mark: None,
            connected: false,
        }
    }
}

struct State {
    master_id: u32,
    master_end: u64,
    replicas: BTreeMap<u32, Replica>,
    insync: BTreeSet<u32>,
    high_watermark: u64,
}

impl State {
    fn watermark(&self) -> Watermark {
        Watermark {
            high_watermark: self.high_watermark,
            insync: self.insync.len(),
        }
    }

    /// The watermark the members' positions give now, never below the
    /// last one.
    fn recompute(&mut self) {
        let members = self
            .insync
            .iter()
            .filter(|&&id| id != self.master_id)
            .map(|id| self.replicas.get(id).map_or(0, |r| r.confirmed));
        let hw = members.fold(self.master_end, u64::min);
        self.high_watermark = self.high_watermark.max(hw);
    }
}

/// One replica's line for `GET /v1/cluster` and the metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplicaStatus {
    pub node_id: u32,
    pub confirmed: u64,
    pub lag_bytes: u64,
    pub in_sync: bool,
    pub connected: bool,
}

/// See the module doc.
pub struct Progress {
    state: Mutex<State>,
    lag_max: Duration,
    watermark: watch::Sender<Watermark>,
}

impl Progress {
    /// A master's progress for its term: `insync` as etcd holds it (the
    /// master is always in it), its own durable end, and the longest a
    /// member may be behind. Members not heard from yet count as caught up
    /// now: they get `lag_max` to connect.
    pub fn new(master_id: u32, insync: BTreeSet<u32>, master_end: u64, lag_max: Duration) -> Self {
        let now = Instant::now();
        let mut insync = insync;
        insync.insert(master_id);
        let replicas = insync
            .iter()
            .filter(|&&id| id != master_id)
            .map(|&id| (id, Replica::new(now)))
            .collect();
        let mut state = State {
            master_id,
            master_end,
            replicas,
            insync,
            high_watermark: 0,
        };
        state.recompute();
        let (watermark, _) = watch::channel(state.watermark());
        Progress {
            state: Mutex::new(state),
            lag_max,
            watermark,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn publish(&self, state: &mut State) {
        state.recompute();
        let w = state.watermark();
        self.watermark.send_if_modified(|old| {
            let changed = *old != w;
            *old = w;
            changed
        });
    }

    /// The master's own log is durable to `end`.
    pub fn master_durable(&self, end: u64) {
        let mut s = self.lock();
        if end > s.master_end {
            s.master_end = end;
            self.publish(&mut s);
        }
    }

    /// Replica `node_id` connected (its first confirmation follows).
    pub fn connected(&self, node_id: u32) {
        let mut s = self.lock();
        let now = Instant::now();
        s.replicas
            .entry(node_id)
            .or_insert_with(|| Replica::new(now))
            .connected = true;
    }

    /// Replica `node_id`'s stream ended.
    pub fn disconnected(&self, node_id: u32) {
        if let Some(r) = self.lock().replicas.get_mut(&node_id) {
            r.connected = false;
            r.mark = None;
        }
    }

    /// Replica `node_id` confirmed its copy durable to `position`.
    pub fn confirmed(&self, node_id: u32, position: u64) {
        self.confirmed_at(node_id, position, Instant::now());
    }

    fn confirmed_at(&self, node_id: u32, position: u64, now: Instant) {
        let mut s = self.lock();
        let master_end = s.master_end;
        let r = s
            .replicas
            .entry(node_id)
            .or_insert_with(|| Replica::new(now));
        if position < r.confirmed {
            return;
        }
        r.confirmed = position;
        match r.mark {
            Some((end, at)) if position >= end => {
                r.caught_up_at = r.caught_up_at.max(at);
                r.mark = Some((master_end, now));
            }
            Some(_) => {}
            None => r.mark = Some((master_end, now)),
        }
        if position >= master_end {
            r.caught_up_at = now;
        }
        self.publish(&mut s);
    }

    /// The watermark now.
    pub fn watermark(&self) -> Watermark {
        self.lock().watermark()
    }

    /// Follows the watermark.
    pub fn subscribe(&self) -> watch::Receiver<Watermark> {
        self.watermark.subscribe()
    }

    /// The in-sync set as it should be now, if that differs from the one
    /// in force: members not caught up within the lag bound leave,
    /// replicas caught up and holding the watermark join. The runtime
    /// writes it to etcd, then calls [`Progress::set_insync`].
    pub fn wanted_insync(&self) -> Option<BTreeSet<u32>> {
        self.wanted_insync_at(Instant::now())
    }

    fn wanted_insync_at(&self, now: Instant) -> Option<BTreeSet<u32>> {
        let s = self.lock();
        let caught_up = |r: &Replica| {
            r.confirmed >= s.master_end
                || now.saturating_duration_since(r.caught_up_at) <= self.lag_max
        };
        let mut want = BTreeSet::from([s.master_id]);
        for (&id, r) in &s.replicas {
            let member = s.insync.contains(&id);
            let keeps = member && caught_up(r);
            let joins = !member && r.connected && caught_up(r) && r.confirmed >= s.high_watermark;
            if keeps || joins {
                want.insert(id);
            }
        }
        (want != s.insync).then_some(want)
    }

    /// The in-sync set etcd now holds (the master always in it).
    pub fn set_insync(&self, insync: BTreeSet<u32>) {
        let mut s = self.lock();
        let now = Instant::now();
        s.insync = insync;
        let master_id = s.master_id;
        s.insync.insert(master_id);
        for id in s.insync.clone() {
            if id != master_id {
                s.replicas.entry(id).or_insert_with(|| Replica::new(now));
            }
        }
        self.publish(&mut s);
    }

    /// The in-sync set in force.
    pub fn insync(&self) -> BTreeSet<u32> {
        self.lock().insync.clone()
    }

    /// Every replica heard of, with its confirmation and lag.
    pub fn replicas(&self) -> Vec<ReplicaStatus> {
        let s = self.lock();
        s.replicas
            .iter()
            .map(|(&node_id, r)| ReplicaStatus {
                node_id,
                confirmed: r.confirmed,
                lag_bytes: s.master_end.saturating_sub(r.confirmed),
                in_sync: s.insync.contains(&node_id),
                connected: r.connected,
            })
            .collect()
    }

    /// Wait until the watermark covers `end` with at least `min_insync`
    /// members in sync, for at most `timeout`. `false`: it did not in
    /// time (Kafka's NOT_ENOUGH_REPLICAS), whatever was written stays.
    pub async fn wait_replicated(&self, end: u64, min_insync: usize, timeout: Duration) -> bool {
        let mut rx = self.subscribe();
        let covered = |w: &Watermark| w.high_watermark >= end && w.insync >= min_insync;
        tokio::time::timeout(timeout, rx.wait_for(covered))
            .await
            .is_ok_and(|r| r.is_ok())
    }
}

#[cfg(test)]
#[path = "progress_tests.rs"]
mod tests;
