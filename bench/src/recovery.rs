//! `tidelog bench --recovery-mib N`: recovery after `kill -9` of a full
//! CommitLog, cold, beside a cold `cat` of the same bytes (issue 17 §4:
//! goal ≤ 1.5× `cat`).
//!
//! 1. Fill: the started server gets `--connections` producers of
//!    `--batch` × `--record-bytes` records into a topic of `--partitions`
//!    until its CommitLog (`tidelog_commitlog_max_offset_bytes`) holds N
//!    MiB, and is killed with SIGKILL while they still send: the crash
//!    lands mid-load, with whatever the dispatcher and checkpoint had not
//!    caught up on.
//! 2. Cold: every file of the data dir is `fdatasync`ed (the killed
//!    process left its writes as dirty page cache, which cannot be
//!    dropped) and dropped from the page cache with
//!    `posix_fadvise(DONTNEED)`: only those files, not the whole machine's
//!    cache, which other work on a shared machine is using.
//! 3. Recovery: `tidelog serve` on the same data dir, timed from spawn to
//!    `/status/ready` answering 200.
//! 4. `cat`: the server stopped (a mapped page cannot be dropped), the
//!    files dropped again, then `cat` of the segments the recovered log
//!    spans (`head -c` of the last, up to the recovered end) to /dev/null,
//!    timed.
//!
//! Both timings start from a cold cache of the same files, so their ratio
//! says what recovery costs beyond reading its log once. Progress is
//! printed every second of the fill and of the recovery.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, ensure, Context as _};
use bytes::Bytes;
use hyper::StatusCode;
use tidelog_api::records::BINARY_V2;

use crate::admin::{cluster_id, ensure_topic};
use crate::body::produce_body;
use crate::client::Conn;
use crate::results::RecoveryFigures;
use crate::target::ChildServer;
use crate::BenchArgs;

/// Issue 17: recovery takes at most this many times a cold `cat`.
pub(crate) const RATIO_GOAL: f64 = 1.5;
/// The most the fill may take (at 10 MB/s, a 4 GiB log takes 7 minutes).
const FILL_TIMEOUT: Duration = Duration::from_secs(1800);
/// The most recovery may take before the run calls it failed.
const RECOVERY_TIMEOUT: Duration = Duration::from_secs(1800);
/// Largest log the bench fills (64 GiB).
pub(crate) const RECOVERY_MIB_MAX: u64 = 64 << 10;
/// Requests a fill producer sends at most, beside the size bound.
const FILL_REQUESTS_MAX: u64 = 100_000_000;
/// Failed produce requests the fill tolerates before it gives up.
const FILL_ERRORS_MAX: u64 = 100;
/// How often the readiness probe asks (recovery is timed to this).
const READY_POLL: Duration = Duration::from_millis(20);

/// The whole recovery run on the started `server` (its figures are read
/// before the cold `cat`, which needs it stopped).
pub(crate) async fn measure(
    args: &BenchArgs,
    topic: &str,
    server: &mut ChildServer,
    mib: u64,
) -> anyhow::Result<(RecoveryFigures, crate::machine::ServerFigures)> {
    let target_bytes = mib << 20;
    let mut admin = Conn::connect(server.addr).await?;
    let cluster = cluster_id(&mut admin).await?;
    let partitions = ensure_topic(&mut admin, &cluster, topic, args.partitions).await?;
    println!(
        "recovery: fill {mib} MiB of CommitLog into {topic} ({partitions} partitions), kill -9, drop its files from the page cache, time the restart to ready beside a cold cat of the same bytes"
    );

    let began = Instant::now();
    let filled_bytes = fill(args, server, topic, partitions, target_bytes).await?;
    let fill_s = began.elapsed().as_secs_f64();
    drop(admin);

    let data = server.data_path();
    let dropped = drop_page_cache(&data)?;
    println!(
        "recovery: killed with SIGKILL at {} MiB; {} files of {} fdatasynced and dropped from the page cache (posix_fadvise DONTNEED)",
        filled_bytes >> 20,
        dropped,
        data.display()
    );

    let began = Instant::now();
    server.respawn()?;
    wait_ready_with_progress(server, began).await?;
    let recovery_s = began.elapsed().as_secs_f64();
    let mut admin = Conn::connect(server.addr).await?;
    let metrics = metrics(&mut admin).await?;
    let min = metric(&metrics, "tidelog_commitlog_min_offset_bytes").unwrap_or(0.0) as u64;
    let max = metric(&metrics, "tidelog_commitlog_max_offset_bytes")
        .ok_or_else(|| anyhow!("/metrics has no tidelog_commitlog_max_offset_bytes"))?
        as u64;
    let segments = metric(&metrics, "tidelog_commitlog_segments").unwrap_or(0.0) as u64;
    println!(
        "recovery: ready after {recovery_s:.2} s with {} MiB of CommitLog in {segments} segments",
        (max - min) >> 20
    );
    drop(admin);
    let held = crate::machine::ServerFigures::read(server.child.id());

    server.stop();
    let files_dropped = drop_page_cache(&data)?;
    let cat_s = cat_log(&data.join("commitlog"), min, max)?;
    let ratio = if cat_s > 0.0 { recovery_s / cat_s } else { 0.0 };
    println!(
        "recovery: cat of the same {} MiB, cold: {cat_s:.2} s",
        (max - min) >> 20
    );
    println!(
        "goal recovery: {recovery_s:.2} s = {ratio:.2}x cat (goal <= {RATIO_GOAL}x): {}",
        crate::render::verdict(ratio <= RATIO_GOAL)
    );
    let figures = RecoveryFigures {
        filled_bytes,
        log_bytes: max - min,
        segments,
        fill_s,
        files_dropped,
        recovery_s,
        cat_s,
        ratio,
    };
    Ok((figures, held))
}

/// Produces until the CommitLog holds `target_bytes`, then kills the
/// server with the producers still sending. Returns the CommitLog's size
/// at the last look before the kill.
async fn fill(
    args: &BenchArgs,
    server: &mut ChildServer,
    topic: &str,
    partitions: u32,
    target_bytes: u64,
) -> anyhow::Result<u64> {
    let body = Bytes::from(produce_body(args.batch, args.record_bytes)?);
    let stop = Arc::new(AtomicBool::new(false));
    let errors = Arc::new(AtomicU64::new(0));
    let mut producers = Vec::with_capacity(args.connections);
    for index in 0..args.connections {
        let mut conn = Conn::connect(server.addr).await?;
        let path = format!("/topics/{topic}/partitions/{}", index as u32 % partitions);
        let (body, stop, errors) = (body.clone(), Arc::clone(&stop), Arc::clone(&errors));
        producers.push(tokio::spawn(async move {
            for _ in 0..FILL_REQUESTS_MAX {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                match conn.post(&path, BINARY_V2, body.clone()).await {
                    Ok(answer) if answer.status == StatusCode::OK => {}
                    // The kill lands while requests are in flight.
                    _ if stop.load(Ordering::Relaxed) => break,
                    Ok(_) | Err(_) => {
                        if errors.fetch_add(1, Ordering::Relaxed) >= FILL_ERRORS_MAX {
                            break;
                        }
                    }
                }
            }
        }));
    }
    let mut probe = Conn::connect(server.addr).await?;
    let began = Instant::now();
    let mut last = 0u64;
    let outcome = loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        if let Err(e) = server.check_alive() {
            break Err(e);
        }
        let failed = errors.load(Ordering::Relaxed);
        if failed >= FILL_ERRORS_MAX {
            break Err(anyhow!("{failed} produce requests failed during the fill"));
        }
        let now = match metrics(&mut probe).await {
            Ok(m) => metric(&m, "tidelog_commitlog_max_offset_bytes").unwrap_or(0.0) as u64,
            Err(e) => break Err(e),
        };
        let secs = began.elapsed().as_secs();
        println!(
            "  [recovery fill] {secs:>3} s: {} of {} MiB, {:.0} MB/s",
            now >> 20,
            target_bytes >> 20,
            (now.saturating_sub(last)) as f64 / 1e6
        );
        last = now;
        if now >= target_bytes {
            break Ok(now);
        }
        if began.elapsed() > FILL_TIMEOUT {
            break Err(anyhow!(
                "the fill reached {} MiB in {FILL_TIMEOUT:?}",
                now >> 20
            ));
        }
    };
    // The crash: SIGKILL with the producers mid-request.
    server.stop();
    stop.store(true, Ordering::Relaxed);
    for producer in producers {
        producer.await.context("a fill producer panicked")?;
    }
    outcome
}

async fn wait_ready_with_progress(server: &mut ChildServer, began: Instant) -> anyhow::Result<()> {
    let mut next_progress = began + Duration::from_secs(1);
    loop {
        server.check_alive()?;
        if let Ok(mut conn) = Conn::connect(server.addr).await {
            if let Ok(answer) = conn.get("/status/ready", "application/json").await {
                if answer.status == StatusCode::OK {
                    return Ok(());
                }
            }
        }
        if began.elapsed() > RECOVERY_TIMEOUT {
            bail!("not ready {RECOVERY_TIMEOUT:?} after the restart");
        }
        if Instant::now() >= next_progress {
            println!(
                "  [recovery] {:>3} s: not ready yet",
                began.elapsed().as_secs()
            );
            next_progress += Duration::from_secs(1);
        }
        tokio::time::sleep(READY_POLL).await;
    }
}

async fn metrics(conn: &mut Conn) -> anyhow::Result<String> {
    let answer = conn.get("/metrics", "text/plain").await?;
    ensure!(
        answer.status == StatusCode::OK,
        "GET /metrics: status {}",
        answer.status
    );
    Ok(String::from_utf8_lossy(&answer.body).into_owned())
}

/// The value of an unlabelled metric in Prometheus text.
pub(crate) fn metric(text: &str, name: &str) -> Option<f64> {
    text.lines().find_map(|line| {
        let rest = line.strip_prefix(name)?.strip_prefix(' ')?;
        rest.trim().parse().ok()
    })
}

/// `fdatasync` and `posix_fadvise(DONTNEED)` every regular file under
/// `dir`; returns how many.
fn drop_page_cache(dir: &Path) -> anyhow::Result<u64> {
    let mut dropped = 0;
    let mut pending = vec![dir.to_path_buf()];
    while let Some(at) = pending.pop() {
        for entry in std::fs::read_dir(&at).with_context(|| format!("listing {}", at.display()))? {
            let entry = entry.with_context(|| format!("listing {}", at.display()))?;
            let kind = entry.file_type()?;
            if kind.is_dir() {
                pending.push(entry.path());
            } else if kind.is_file() {
                drop_file(&entry.path())?;
                dropped += 1;
            }
        }
    }
    Ok(dropped)
}

fn drop_file(path: &Path) -> anyhow::Result<()> {
    use std::os::fd::AsRawFd as _;
    let file = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    // Dirty pages cannot be dropped: write them first.
    file.sync_data()
        .with_context(|| format!("fdatasync {}", path.display()))?;
    // SAFETY: a valid open descriptor; the call only advises the kernel.
    let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    ensure!(
        rc == 0,
        "posix_fadvise(DONTNEED) {}: error {rc}",
        path.display()
    );
    Ok(())
}

/// Times `cat` of the CommitLog bytes `[min, max)` to /dev/null: whole
/// segments with `cat`, the last one up to `max` with `head -c`.
fn cat_log(commitlog: &Path, min: u64, max: u64) -> anyhow::Result<f64> {
    let (whole, tail) = segments_to_read(commitlog, min, max)?;
    let began = Instant::now();
    if !whole.is_empty() {
        run_to_null(std::process::Command::new("cat").args(&whole))?;
    }
    if let Some((path, bytes)) = tail {
        run_to_null(
            std::process::Command::new("head")
                .arg("-c")
                .arg(bytes.to_string())
                .arg(path),
        )?;
    }
    Ok(began.elapsed().as_secs_f64())
}

/// Segment files read whole, and the last one with the bytes to read of
/// it.
type LogRead = (Vec<PathBuf>, Option<(PathBuf, u64)>);

/// The segment files holding `[min, max)`, in log order: those read
/// whole, and the last one with the bytes to read of it.
fn segments_to_read(commitlog: &Path, min: u64, max: u64) -> anyhow::Result<LogRead> {
    let mut segments = Vec::new();
    for entry in
        std::fs::read_dir(commitlog).with_context(|| format!("listing {}", commitlog.display()))?
    {
        let entry = entry?;
        let name = entry.file_name();
        // Segment files are named by their first byte's offset, 20 digits.
        let Some(base) = name.to_str().and_then(|n| n.parse::<u64>().ok()) else {
            continue;
        };
        segments.push((base, entry.path(), entry.metadata()?.len()));
    }
    segments.sort();
    Ok(split_segments(&segments, min, max))
}

/// Of `(base, path, len)` sorted by base: those inside `[min, max)`
/// whole, and the one `max` ends inside with its byte count.
fn split_segments(segments: &[(u64, PathBuf, u64)], min: u64, max: u64) -> LogRead {
    let mut whole = Vec::new();
    let mut tail = None;
    for (base, path, len) in segments {
        let end = base.saturating_add(*len);
        if end <= min || *base >= max {
            continue;
        }
        if end <= max {
            whole.push(path.clone());
        } else {
            tail = Some((path.clone(), max - base));
        }
    }
    (whole, tail)
}

fn run_to_null(command: &mut std::process::Command) -> anyhow::Result<()> {
    let status = command
        .stdout(std::process::Stdio::null())
        .status()
        .with_context(|| format!("running {command:?}"))?;
    ensure!(status.success(), "{command:?}: {status}");
    Ok(())
}

/// Whether `--recovery-mib` can run with these options.
pub(crate) fn check_args(args: &BenchArgs, mib: u64) -> anyhow::Result<()> {
    ensure!(
        (1..=RECOVERY_MIB_MAX).contains(&mib),
        "--recovery-mib must be 1..={RECOVERY_MIB_MAX}"
    );
    ensure!(
        args.url.is_none(),
        "--recovery-mib needs the server the bench starts (it kills it): drop --url"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_are_read_by_whole_name() {
        let text = "# HELP tidelog_commitlog_max_offset_bytes x\n# TYPE tidelog_commitlog_max_offset_bytes gauge\ntidelog_commitlog_max_offset_bytes 4294967296\ntidelog_commitlog_max_offset_bytes_other 1\n";
        assert_eq!(
            metric(text, "tidelog_commitlog_max_offset_bytes"),
            Some(4_294_967_296.0)
        );
        assert_eq!(metric(text, "tidelog_commitlog_max_offset"), None);
        assert_eq!(metric(text, "tidelog_commitlog_segments"), None);
    }

    #[test]
    fn the_log_range_picks_whole_segments_and_the_tail() {
        let gib = 1u64 << 30;
        let seg = |i: u64| (i * gib, PathBuf::from(format!("{:020}", i * gib)), gib);
        let segments = [seg(0), seg(1), seg(2)];
        // 1.5 GiB written; the third segment is the preallocated next one.
        let (whole, tail) = split_segments(&segments, 0, gib + gib / 2);
        assert_eq!(whole, vec![segments[0].1.clone()]);
        assert_eq!(tail, Some((segments[1].1.clone(), gib / 2)));
        // Exactly two segments: no tail, nothing of the third.
        let (whole, tail) = split_segments(&segments, 0, 2 * gib);
        assert_eq!(whole.len(), 2);
        assert_eq!(tail, None);
        // Retention removed the first: it is not read.
        let (whole, tail) = split_segments(&segments[1..], gib, 2 * gib + 10);
        assert_eq!(whole, vec![segments[1].1.clone()]);
        assert_eq!(tail, Some((segments[2].1.clone(), 10)));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_page_cache_of_every_file_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("a"), b"x").unwrap();
        std::fs::write(dir.path().join("sub/b"), b"y").unwrap();
        assert_eq!(drop_page_cache(dir.path()).unwrap(), 2);
    }
}
