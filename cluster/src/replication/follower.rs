//! The replica's side of the stream: connect to the master, find where
//! the two logs part ways, then copy the master's bytes as they come and
//! confirm how far the copy is durable.
//!
//! 1. HELLO with this node's id, the cluster's name, the epoch it last
//!    followed and its log's end; the master answers EPOCHS.
//! 2. Where the logs part: [`common_end`] of the two epoch files. Past it
//!    this log holds bytes the master does not: [`FollowEnd::MustCut`],
//!    and the node runtime cuts at its next open (`tidelog_storage::cut`)
//!    and follows again. Else the epochs the master began past this log's
//!    last one are taken on as the copy reaches them, each made durable
//!    before a byte of it is (so this epoch file always describes this
//!    log).
//! 3. A CONFIRM names where the copy goes on; then DATA is placed with
//!    `Store::append_copy` (checked, planned whole, dispatched as the
//!    master's own appends are), and each is confirmed once durable as
//!    the flush mode promises (fsynced under `flush: sync`). A WATERMARK
//!    caps this node's readers, and is answered with a CONFIRM (the
//!    master drops a silent replica); until the first, readers see no
//!    more than the log held when the stream began.
//!
//! A frame of another epoch than the master's EPOCHS named, a frame out of
//! turn, a refused copy or silence past `read_timeout` ends the stream
//! with an error; the runtime reconnects (to whoever is master then).

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tidelog_storage::epochs::{common_end, EpochEntry, Epochs};
use tidelog_storage::error::CopyProblem;
use tidelog_storage::{FlushMode, Store, StoreError};
use tokio::sync::{mpsc, watch};

use super::link;
use super::source::{kind_name, timed};
use super::wire::{read_frame, write_frame};
use super::ReplicationError;
use crate::frame::{Frame, DATA_MAX};

/// A replica's settings.
#[derive(Clone, Debug)]
pub struct FollowerConfig {
    pub cluster: String,
    pub node_id: u32,
    /// Longest wait to connect and for the master's EPOCHS.
    pub handshake_timeout: Duration,
    /// Longest silence from the master (it sends a WATERMARK at least
    /// every heartbeat) before it is taken for dead.
    pub read_timeout: Duration,
    /// TLS towards the master with the node's own certificate (the
    /// cluster runs with `tls`), else plain TCP.
    pub tls: Option<Arc<tokio_rustls::rustls::ClientConfig>>,
}

/// How a stream that did not fail ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FollowEnd {
    /// This log holds bytes past where it and the master's part: cut at
    /// this position (at the next open), then follow again.
    MustCut(u64),
    /// Asked to stop.
    Stopped,
}

/// What a follower reports as it goes (the node's status page).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FollowState {
    /// The epoch of the master followed (0 before the first EPOCHS).
    pub epoch: u64,
    /// The master's log end when last heard of.
    pub master_end: u64,
    /// The last watermark received.
    pub high_watermark: u64,
}

/// Largest entry put back together from several DATA frames: the
/// store's bound on an entry.
const REASSEMBLY_MAX: usize = tidelog_storage::commit_log::format::RECORD_LEN_MAX + DATA_MAX;

/// A replica's side (see the module doc), over what holds its store (`S`:
/// the broker, or a bare store).
pub struct Follower<S> {
    holder: Arc<S>,
    data_dir: PathBuf,
    config: FollowerConfig,
    state: watch::Sender<FollowState>,
}

impl<S: AsRef<Store> + Send + Sync + 'static> Follower<S> {
    pub fn new(holder: Arc<S>, config: FollowerConfig) -> Follower<S> {
        let data_dir = (*holder).as_ref().data_dir().to_path_buf();
        Follower {
            holder,
            data_dir,
            config,
            state: watch::channel(FollowState::default()).0,
        }
    }

    fn store(&self) -> &Store {
        (*self.holder).as_ref()
    }

    /// Follows what this follower reports.
    pub fn subscribe(&self) -> watch::Receiver<FollowState> {
        self.state.subscribe()
    }

    /// Follow the master at `master` until the stream ends, a cut is
    /// needed, or `stop` turns true.
    pub async fn follow(
        &self,
        master: &str,
        mut stop: watch::Receiver<bool>,
    ) -> Result<FollowEnd, ReplicationError> {
        let limit = self.config.handshake_timeout;
        let stream = timed(
            limit,
            "connecting to the master",
            link::connect(master, self.config.tls.as_ref()),
        )
        .await?;
        let (mut rd, mut wr) = tokio::io::split(stream);
        let mine = self.load_epochs().await?;
        let my_end = self.store().commit_log().committed();
        // This node's readers see what the cluster's watermark covers:
        // copies past what it holds now wait for the master's WATERMARK.
        // A store opened as a cluster's member is capped already, at the
        // watermark it kept (its tail past that held back too); one
        // opened as a single node's is not, and is capped here. A cap
        // set stays: it never goes down.
        let log = self.store().commit_log();
        if log.high_watermark() == u64::MAX {
            log.cap_visible_at(my_end);
        }
        let hello = Frame::Hello {
            epoch: mine.last().map_or(0, |e| e.epoch),
            node_id: self.config.node_id,
            log_end: my_end,
            cluster: self.config.cluster.clone(),
        };
        write_frame(&mut wr, &hello).await?;
        let (epoch, their_end, theirs) =
            match timed(limit, "the master's EPOCHS", read_frame(&mut rd)).await? {
                Frame::Epochs {
                    epoch,
                    log_end,
                    entries,
                } => (epoch, log_end, entries),
                Frame::Refused { code, reason, .. } => {
                    return Err(ReplicationError::Refused { code, reason })
                }
                other => {
                    return Err(ReplicationError::OutOfTurn {
                        expected: "EPOCHS",
                        got: kind_name(&other),
                    })
                }
            };
        let common = common_end(&mine, my_end, &theirs, their_end);
        if common < my_end {
            tracing::warn!(
                my_end,
                common,
                master_epoch = epoch,
                "this log holds bytes the master's does not; cutting back to where they part"
            );
            return Ok(FollowEnd::MustCut(common));
        }
        let last_mine = mine.last().map_or(0, |e| e.epoch);
        let mut to_adopt: VecDeque<EpochEntry> = theirs
            .iter()
            .filter(|e| e.epoch > last_mine)
            .copied()
            .collect();
        self.state.send_modify(|s| {
            s.epoch = epoch;
            s.master_end = their_end;
        });
        write_frame(
            &mut wr,
            &Frame::Confirm {
                epoch,
                flushed: my_end,
            },
        )
        .await?;
        tracing::info!(master, epoch, from = my_end, "following the master");

        // Confirmations go out from one writer task: after each copy once
        // it is durable, and in answer to each watermark.
        let (confirm_tx, mut confirm_rx) = mpsc::channel::<Frame>(64);
        let (durable_tx, durable_rx) = watch::channel(my_end);
        let writer = async move {
            while let Some(f) = confirm_rx.recv().await {
                write_frame(&mut wr, &f).await?;
            }
            Ok::<(), ReplicationError>(())
        };
        let confirmer = confirm_durable(
            Arc::clone(&self.holder),
            epoch,
            durable_rx,
            confirm_tx.clone(),
        );

        let reader = async {
            let mut pending = BytesMut::new();
            let mut pending_at = my_end;
            loop {
                let frame = timed(
                    self.config.read_timeout,
                    "the master's next frame",
                    read_frame(&mut rd),
                )
                .await?;
                if frame_epoch(&frame) != epoch {
                    return Err(ReplicationError::StaleEpoch {
                        ours: epoch,
                        theirs: frame_epoch(&frame),
                    });
                }
                match frame {
                    Frame::Data {
                        position, bytes, ..
                    } => {
                        let (at, run) = if pending.is_empty() {
                            (position, bytes)
                        } else if position == pending_at + pending.len() as u64 {
                            pending.extend_from_slice(&bytes);
                            (pending_at, pending.split().freeze())
                        } else {
                            return Err(ReplicationError::BadPosition {
                                position,
                                log_end: pending_at + pending.len() as u64,
                            });
                        };
                        match self.place(at, run.clone(), &mut to_adopt).await {
                            Ok(end) => {
                                durable_tx.send_replace(end);
                            }
                            // An entry larger than a frame: wait for the rest.
                            Err(ReplicationError::Store(StoreError::CopyRefused {
                                problem: CopyProblem::TornEntry { needed, .. },
                                ..
                            })) if needed <= REASSEMBLY_MAX && run.len() < REASSEMBLY_MAX => {
                                pending_at = at;
                                pending = BytesMut::from(&run[..]);
                            }
                            Err(e) => return Err(e),
                        }
                    }
                    Frame::Watermark { high_watermark, .. } => {
                        // Never past what this node holds: the watermark
                        // may run ahead of the copy.
                        let held = self.store().commit_log().committed();
                        self.store()
                            .commit_log()
                            .set_high_watermark(high_watermark.min(held));
                        self.state
                            .send_modify(|s| s.high_watermark = high_watermark);
                        let confirm = Frame::Confirm {
                            epoch,
                            flushed: self.store().copied_durable(),
                        };
                        if confirm_tx.send(confirm).await.is_err() {
                            return Err(ReplicationError::Closed);
                        }
                    }
                    Frame::Refused { code, reason, .. } => {
                        return Err(ReplicationError::Refused { code, reason })
                    }
                    other => {
                        return Err(ReplicationError::OutOfTurn {
                            expected: "DATA or WATERMARK",
                            got: kind_name(&other),
                        })
                    }
                }
            }
        };
        tokio::select! {
            r = reader => r,
            r = writer => r.map(|()| FollowEnd::Stopped),
            r = confirmer => r.map(|()| FollowEnd::Stopped),
            _ = stopped(&mut stop) => Ok(FollowEnd::Stopped),
        }
    }

    async fn load_epochs(&self) -> Result<Vec<EpochEntry>, ReplicationError> {
        let dir = self.data_dir.clone();
        let epochs = tokio::task::spawn_blocking(move || Epochs::load(&dir))
            .await
            .map_err(|_| ReplicationError::Closed)??;
        Ok(epochs.entries().to_vec())
    }

    /// Place `run` at `at`: first every epoch of the master's that begins
    /// before the run's end, durably, then the bytes. Returns the log's
    /// end after it.
    async fn place(
        &self,
        at: u64,
        run: Bytes,
        to_adopt: &mut VecDeque<EpochEntry>,
    ) -> Result<u64, ReplicationError> {
        let run_end = at + run.len() as u64;
        let mut adopt = Vec::new();
        while to_adopt.front().is_some_and(|e| e.start < run_end) {
            adopt.extend(to_adopt.pop_front());
        }
        let holder = Arc::clone(&self.holder);
        let dir = self.data_dir.clone();
        tokio::task::spawn_blocking(move || {
            let store = (*holder).as_ref();
            if !adopt.is_empty() {
                let mut epochs = Epochs::load(&dir)?;
                for e in adopt {
                    epochs.begin(e.epoch, e.start)?;
                }
            }
            Ok::<_, StoreError>(store.append_copy(at, &run)?.end)
        })
        .await
        .map_err(|_| ReplicationError::Closed)?
        .map_err(ReplicationError::Store)
    }
}

/// Confirm each position `durable` names once it is durable as the flush
/// mode promises (flushed under `sync`; written under `async`).
async fn confirm_durable<S: AsRef<Store>>(
    holder: Arc<S>,
    epoch: u64,
    mut durable: watch::Receiver<u64>,
    out: mpsc::Sender<Frame>,
) -> Result<(), ReplicationError> {
    let store = (*holder).as_ref();
    let sync = store.config().flush == FlushMode::Sync;
    let timeout = Duration::from_millis(store.config().sync_flush_timeout_ms);
    loop {
        if durable.changed().await.is_err() {
            return Ok(());
        }
        let end = *durable.borrow_and_update();
        if sync {
            // A flush that timed out is confirmed later, by the next copy
            // or watermark; the error itself says nothing of the copy.
            let _ = store.commit_log().flush_wait(end, timeout).await;
        }
        let confirm = Frame::Confirm {
            epoch,
            flushed: store.copied_durable(),
        };
        if out.send(confirm).await.is_err() {
            return Ok(());
        }
    }
}

fn frame_epoch(f: &Frame) -> u64 {
    match f {
        Frame::Hello { epoch, .. }
        | Frame::Epochs { epoch, .. }
        | Frame::Data { epoch, .. }
        | Frame::Confirm { epoch, .. }
        | Frame::Refused { epoch, .. }
        | Frame::Watermark { epoch, .. } => *epoch,
    }
}

/// Resolves once `stop` is true or its sender is gone.
pub(super) async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}
