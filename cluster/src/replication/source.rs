//! The master's side of the stream: one task per replica connection, and
//! two that follow the master's own log (its durable end into
//! [`Progress`], the watermark into the store's readers' cap).
//!
//! A connection: the replica's HELLO (its cluster's name checked: a
//! stranger is refused), the master's EPOCHS (its epoch file and log
//! end), the replica's first CONFIRM naming where it goes on (it cut
//! first if it had to, and reconnected), then DATA from there, as the log
//! grows, with a WATERMARK whenever it moves and at least every
//! `heartbeat` (so a replica tells a dead master from an idle one). The
//! replica's CONFIRMs feed [`Progress`]. Every frame read has a deadline;
//! a frame of another epoch, or out of turn, ends the connection.
//!
//! One [`Source`] serves one term (one epoch): a node that stops being
//! master drops it, which ends its streams; a new term is a new `Source`.

use std::sync::Arc;
use std::time::Duration;

use tidelog_storage::epochs::EpochEntry;
use tidelog_storage::Store;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::link::Link;
use super::progress::Progress;
use super::wire::{read_frame, write_frame};
use super::ReplicationError;
use crate::frame::{Frame, RefusalCode, DATA_MAX};

/// A master term's settings.
#[derive(Clone, Debug)]
pub struct SourceConfig {
    /// The cluster's name (`cluster.name`): replicas of another are refused.
    pub cluster: String,
    pub node_id: u32,
    /// This term's epoch: on every frame sent, asked of every frame read.
    pub epoch: u64,
    /// Longest wait for a replica's HELLO and first CONFIRM.
    pub handshake_timeout: Duration,
    /// A WATERMARK at least this often on an idle stream.
    pub heartbeat: Duration,
    /// Longest silence from a replica (it confirms at least every
    /// heartbeat it receives) before its stream is dropped.
    pub read_timeout: Duration,
}

/// The master's side of one term (see the module doc), over what holds
/// the master's store (`S`: the broker, or a bare store).
pub struct Source<S> {
    holder: Arc<S>,
    config: SourceConfig,
    /// The master's epoch file as it was when the term began.
    epochs: Vec<EpochEntry>,
    progress: Arc<Progress>,
}

impl<S: AsRef<Store> + Send + Sync + 'static> Source<S> {
    pub fn new(
        holder: Arc<S>,
        config: SourceConfig,
        epochs: Vec<EpochEntry>,
        progress: Arc<Progress>,
    ) -> Arc<Source<S>> {
        Arc::new(Source {
            holder,
            config,
            epochs,
            progress,
        })
    }

    /// What holds the master's store (the node's broker).
    pub fn holder(&self) -> &Arc<S> {
        &self.holder
    }

    pub fn progress(&self) -> &Arc<Progress> {
        &self.progress
    }

    fn store(&self) -> &Store {
        (*self.holder).as_ref()
    }

    /// This term's epoch.
    pub fn epoch(&self) -> u64 {
        self.config.epoch
    }

    /// Serve replicas on `listener`, and follow the master's log, until
    /// `stop` turns true (or its sender is dropped): then every stream
    /// ends. A node that keeps its listener across terms accepts itself
    /// and hands each connection to [`Source::stream`], running
    /// [`Source::follow_log`] beside.
    pub async fn serve(self: Arc<Self>, listener: TcpListener, mut stop: watch::Receiver<bool>) {
        let mut tasks = JoinSet::new();
        tasks.spawn(Arc::clone(&self).follow_log());
        loop {
            tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok((stream, peer)) => {
                        let _ = stream.set_nodelay(true);
                        let me = Arc::clone(&self);
                        tasks.spawn(async move {
                            if let Err(e) = me.stream(stream).await {
                                tracing::info!(%peer, error = %e, "replication stream ended");
                            }
                        });
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "replication listener: accept failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                },
                changed = stop.changed() => {
                    if changed.is_err() || *stop.borrow() {
                        break;
                    }
                }
                // Reap finished streams as they end.
                Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
            }
        }
        tasks.shutdown().await;
    }

    /// The master's own log, for the term: its durable end into the
    /// progress, and the watermark as its readers' cap. Runs until
    /// dropped.
    pub async fn follow_log(self: Arc<Self>) {
        tokio::join!(
            Arc::clone(&self).follow_own_log(),
            Arc::clone(&self).cap_readers()
        );
    }

    /// The master's own durable end, into the progress.
    async fn follow_own_log(self: Arc<Self>) {
        loop {
            let flushed = self.store().listen_flushed();
            let appended = self.store().listen_appended();
            self.progress.master_durable(self.store().copied_durable());
            // Either event may move it (a flush under sync, an append
            // under async); the timeout bounds a missed wake-up.
            let wait = tokio::time::timeout(self.config.heartbeat, async {
                tokio::select! {
                    _ = flushed => {}
                    _ = appended => {}
                }
            });
            let _ = wait.await;
        }
    }

    /// The watermark, as readers' cap on this node.
    async fn cap_readers(self: Arc<Self>) {
        let mut rx = self.progress.subscribe();
        loop {
            let hw = rx.borrow_and_update().high_watermark;
            self.store().commit_log().set_high_watermark(hw);
            if rx.changed().await.is_err() {
                return;
            }
        }
    }

    fn refused(&self, code: RefusalCode, reason: String) -> Frame {
        Frame::Refused {
            epoch: self.config.epoch,
            code,
            reason,
        }
    }

    /// One replica's stream, until it ends.
    pub async fn stream(self: Arc<Self>, stream: impl Link) -> Result<(), ReplicationError> {
        let (mut rd, mut wr) = tokio::io::split(stream);
        let deadline = self.config.handshake_timeout;
        let hello = timed(deadline, "the replica's HELLO", read_frame(&mut rd)).await?;
        let Frame::Hello {
            node_id, cluster, ..
        } = hello
        else {
            return Err(ReplicationError::OutOfTurn {
                expected: "HELLO",
                got: kind_name(&hello),
            });
        };
        if cluster != self.config.cluster || node_id == self.config.node_id {
            let reason = if node_id == self.config.node_id {
                format!("node id {node_id} is this master's own")
            } else {
                format!("this is cluster {:?}, not {cluster:?}", self.config.cluster)
            };
            let _ = write_frame(
                &mut wr,
                &self.refused(RefusalCode::OtherCluster, reason.clone()),
            )
            .await;
            return Err(ReplicationError::Stranger { node_id, reason });
        }
        let log = self.store().commit_log();
        let epochs = Frame::Epochs {
            epoch: self.config.epoch,
            log_end: log.committed(),
            entries: self.epochs.clone(),
        };
        write_frame(&mut wr, &epochs).await?;
        let first = timed(deadline, "the replica's start", read_frame(&mut rd)).await?;
        let start = match confirmed(first, self.config.epoch) {
            Ok(start) => start,
            Err(e) => {
                if let ReplicationError::StaleEpoch { ours, .. } = e {
                    let reason = format!("this term is epoch {ours}");
                    let _ =
                        write_frame(&mut wr, &self.refused(RefusalCode::StaleEpoch, reason)).await;
                }
                return Err(e);
            }
        };
        let end = log.committed();
        if start > end || start < log.min_offset() {
            let reason = format!(
                "position {start} is outside this log [{}, {end})",
                log.min_offset()
            );
            let _ = write_frame(&mut wr, &self.refused(RefusalCode::BadPosition, reason)).await;
            return Err(ReplicationError::BadPosition {
                position: start,
                log_end: end,
            });
        }
        tracing::info!(
            node_id,
            start,
            epoch = self.config.epoch,
            "replica connected"
        );
        self.progress.connected(node_id);
        self.progress.confirmed(node_id, start);

        let epoch = self.config.epoch;
        let progress = Arc::clone(&self.progress);
        let read_timeout = self.config.read_timeout;
        let confirms = async move {
            loop {
                let frame = timed(read_timeout, "a CONFIRM", read_frame(&mut rd)).await?;
                progress.confirmed(node_id, confirmed(frame, epoch)?);
            }
        };
        let result = tokio::select! {
            r = confirms => r,
            r = self.send_from(start, &mut wr) => r,
        };
        self.progress.disconnected(node_id);
        result
    }

    /// DATA from `start` as the log grows, and the watermark.
    async fn send_from(
        &self,
        start: u64,
        wr: &mut (impl tokio::io::AsyncWrite + Unpin),
    ) -> Result<(), ReplicationError> {
        let epoch = self.config.epoch;
        let log = self.store().commit_log();
        let mut hw_rx = self.progress.subscribe();
        let mut sent_hw = None;
        let mut pos = start;
        loop {
            let appended = self.store().listen_appended();
            if let Some(chunk) = log.read_for_copy(pos, DATA_MAX)? {
                // A single entry larger than a frame goes in several;
                // the replica puts them back together.
                let mut at = chunk.at;
                for piece in chunk.bytes.chunks(DATA_MAX) {
                    let bytes = chunk.bytes.slice_ref(piece);
                    let len = bytes.len() as u64;
                    write_frame(
                        wr,
                        &Frame::Data {
                            epoch,
                            position: at,
                            bytes,
                        },
                    )
                    .await?;
                    at += len;
                }
                pos = chunk.next;
                continue;
            }
            let hw = hw_rx.borrow_and_update().high_watermark;
            if sent_hw != Some(hw) {
                write_frame(
                    wr,
                    &Frame::Watermark {
                        epoch,
                        high_watermark: hw,
                    },
                )
                .await?;
                sent_hw = Some(hw);
            }
            tokio::select! {
                _ = appended => {}
                _ = hw_rx.changed() => {}
                _ = tokio::time::sleep(self.config.heartbeat) => sent_hw = None,
            }
        }
    }
}

/// The position a replica's CONFIRM of `epoch` names; any other frame
/// ends the stream (a refusal, another epoch, a frame out of turn).
fn confirmed(frame: Frame, epoch: u64) -> Result<u64, ReplicationError> {
    match frame {
        Frame::Confirm { epoch: e, flushed } if e == epoch => Ok(flushed),
        Frame::Confirm { epoch: e, .. } => Err(ReplicationError::StaleEpoch {
            ours: epoch,
            theirs: e,
        }),
        Frame::Refused { code, reason, .. } => Err(ReplicationError::Refused { code, reason }),
        other => Err(ReplicationError::OutOfTurn {
            expected: "CONFIRM",
            got: kind_name(&other),
        }),
    }
}

/// `fut`, or [`ReplicationError::Timeout`] naming `what` after `limit`.
pub(super) async fn timed<T, E: Into<ReplicationError>>(
    limit: Duration,
    what: &'static str,
    fut: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, ReplicationError> {
    match tokio::time::timeout(limit, fut).await {
        Ok(r) => r.map_err(Into::into),
        Err(_) => Err(ReplicationError::Timeout {
            what,
            after_ms: limit.as_millis() as u64,
        }),
    }
}

pub(super) fn kind_name(f: &Frame) -> &'static str {
    match f {
        Frame::Hello { .. } => "HELLO",
        Frame::Epochs { .. } => "EPOCHS",
        Frame::Data { .. } => "DATA",
        Frame::Confirm { .. } => "CONFIRM",
        Frame::Refused { .. } => "REFUSED",
        Frame::Watermark { .. } => "WATERMARK",
    }
}
