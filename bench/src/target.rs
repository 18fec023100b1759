//! The servers under test that are not in this process: a child
//! `tidelog serve` with a temporary data dir, or a running one (`--url`).

use std::ffi::OsString;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, ensure, Context as _};

use crate::{BenchArgs, Protocol};

/// `tidelog serve` as a child process on a free port with a temporary data
/// dir; killed when stopped or dropped (the data dir goes with it).
pub(crate) struct ChildServer {
    pub(crate) child: std::process::Child,
    pub(crate) addr: SocketAddr,
    /// Its Kafka listener (`--protocol kafka` only).
    pub(crate) kafka_addr: Option<SocketAddr>,
    pub(crate) data_dir: tempfile::TempDir,
    pub(crate) log_path: PathBuf,
    /// `serve` and its options, for a restart on the same data dir and
    /// ports (`respawn`).
    serve_args: Vec<OsString>,
}

impl ChildServer {
    pub(crate) fn start(args: &BenchArgs) -> anyhow::Result<ChildServer> {
        ChildServer::start_with(args, None)
    }

    /// [`ChildServer::start`] with `overlay` merged over its config
    /// (`--server-config` and `--flush`; the overlay's keys win, section by
    /// section): a secured server's `tls:`, listeners and users. An
    /// overlay that declares `kafka.listeners` replaces the Kafka port the
    /// bench would pick (`kafka_addr` is then `None`: the caller chose
    /// the listeners' ports).
    pub(crate) fn start_with(
        args: &BenchArgs,
        overlay: Option<&serde_yaml::Mapping>,
    ) -> anyhow::Result<ChildServer> {
        let data_dir = match &args.data_dir {
            Some(parent) => tempfile::Builder::new()
                .prefix("tidelog-bench-")
                .tempdir_in(parent),
            None => tempfile::Builder::new().prefix("tidelog-bench-").tempdir(),
        }
        .context("creating the temporary data dir")?;
        let log_path = data_dir.path().join("server.log");
        let data_path = data_dir.path().join("data");
        let addr = free_local_addr()?;
        let listeners_given = overlay
            .and_then(|o| o.get("kafka"))
            .and_then(|k| k.get("listeners"))
            .is_some();
        let kafka_addr = match args.protocol {
            Protocol::Kafka if !listeners_given => Some(free_local_addr()?),
            _ => None,
        };
        let mut serve_args: Vec<OsString> = vec![
            "serve".into(),
            "--data-dir".into(),
            data_path.into(),
            "--listen".into(),
            addr.to_string().into(),
        ];
        if !listeners_given {
            // A free port: parallel runs would collide on the default one
            // (and the HTTP bench needs no Kafka listener).
            serve_args.extend([
                "--kafka-listen".into(),
                kafka_addr
                    .map_or_else(|| "none".to_string(), |a| a.to_string())
                    .into(),
            ]);
        }
        if args.flush.is_some() || overlay.is_some() {
            let generated = data_dir.path().join("server.yaml");
            write_config(
                args.server_config.as_deref(),
                args.flush,
                overlay,
                &generated,
            )?;
            serve_args.extend(["--config".into(), generated.into()]);
        } else if let Some(config) = &args.server_config {
            serve_args.extend(["--config".into(), config.into()]);
        }
        let child = spawn_serve(&serve_args, &log_path)?;
        Ok(ChildServer {
            child,
            addr,
            kafka_addr,
            data_dir,
            log_path,
            serve_args,
        })
    }

    /// The server's data dir (inside the temporary dir, beside its log).
    pub(crate) fn data_path(&self) -> PathBuf {
        self.data_dir.path().join("data")
    }

    /// Starts the server again on the same data dir and ports, after it
    /// was stopped (its log is appended to).
    pub(crate) fn respawn(&mut self) -> anyhow::Result<()> {
        self.stop();
        self.child = spawn_serve(&self.serve_args, &self.log_path)?;
        Ok(())
    }

    pub(crate) fn check_alive(&mut self) -> anyhow::Result<()> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => Err(anyhow!(
                "the tidelog server exited with {status}; its log:\n{}",
                std::fs::read_to_string(&self.log_path).unwrap_or_default()
            )),
            Err(e) => Err(anyhow!("checking on the tidelog server: {e}")),
        }
    }

    /// `kill -9` (SIGKILL, what `Child::kill` sends) and reap: its data
    /// is thrown away, so there is nothing to shut down cleanly, and the
    /// recovery bench wants exactly this crash.
    pub(crate) fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `tidelog serve` with `serve_args`, stderr appended to `log_path`.
fn spawn_serve(serve_args: &[OsString], log_path: &Path) -> anyhow::Result<std::process::Child> {
    let exe = std::env::current_exe().context("locating the tidelog binary")?;
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log_path)
        .with_context(|| format!("opening {}", log_path.display()))?;
    std::process::Command::new(&exe)
        .args(serve_args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(log)
        .spawn()
        .with_context(|| format!("starting {} serve", exe.display()))
}

impl Drop for ChildServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The started server's config: `base` (or an empty one) with
/// `store.flush` set (`--flush`) and `overlay` merged over it, written to
/// `to`.
fn write_config(
    base: Option<&std::path::Path>,
    flush: Option<crate::Flush>,
    overlay: Option<&serde_yaml::Mapping>,
    to: &std::path::Path,
) -> anyhow::Result<()> {
    let mut config = match base {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            serde_yaml::from_str(&text).with_context(|| format!("parsing {}", path.display()))?
        }
        None => serde_yaml::Value::Null,
    };
    if config.is_null() {
        config = serde_yaml::Value::Mapping(Default::default());
    }
    let root = config
        .as_mapping_mut()
        .ok_or_else(|| anyhow!("the server config is not a YAML mapping"))?;
    if let Some(overlay) = overlay {
        merge(root, overlay);
    }
    let Some(flush) = flush else {
        let text = serde_yaml::to_string(&config).context("writing the server config")?;
        return std::fs::write(to, text).with_context(|| format!("writing {}", to.display()));
    };
    let store = root
        .entry("store".into())
        .or_insert_with(|| serde_yaml::Value::Mapping(Default::default()));
    if store.is_null() {
        *store = serde_yaml::Value::Mapping(Default::default());
    }
    let store = store
        .as_mapping_mut()
        .ok_or_else(|| anyhow!("the server config's store: is not a YAML mapping"))?;
    let mode = match flush {
        crate::Flush::Sync => "sync",
        crate::Flush::Async => "async",
    };
    store.insert("flush".into(), mode.into());
    let text = serde_yaml::to_string(&config).context("writing the server config")?;
    std::fs::write(to, text).with_context(|| format!("writing {}", to.display()))
}

/// `overlay`'s keys into `into`: a mapping into a mapping key by key, any
/// other value replacing what was there.
fn merge(into: &mut serde_yaml::Mapping, overlay: &serde_yaml::Mapping) {
    for (key, value) in overlay {
        match (into.get_mut(key), value) {
            (Some(serde_yaml::Value::Mapping(held)), serde_yaml::Value::Mapping(more)) => {
                merge(held, more)
            }
            _ => {
                into.insert(key.clone(), value.clone());
            }
        }
    }
}

/// A free port on 127.0.0.1 (bound, read and released), never one this
/// process handed out before: the ports are picked before anything binds
/// them, so the kernel can give a released port back, and a server then
/// refused its config (two listeners on one port) or two servers raced.
pub(crate) fn free_local_addr() -> anyhow::Result<SocketAddr> {
    static HANDED_OUT: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let mut handed_out = HANDED_OUT.lock().unwrap_or_else(|e| e.into_inner());
    for _ in 0..100 {
        let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .context("finding a free port on 127.0.0.1")?;
        let addr = listener.local_addr().context("finding a free port")?;
        if !handed_out.contains(&addr.port()) {
            handed_out.push(addr.port());
            return Ok(addr);
        }
    }
    Err(anyhow!(
        "the kernel gave back only ports this process had handed out already"
    ))
}

/// `http://127.0.0.1:PORT` (or `localhost`), with an optional trailing `/`.
pub(crate) fn parse_local_url(url: &str) -> anyhow::Result<SocketAddr> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| anyhow!("--url {url:?}: only http://127.0.0.1:PORT is supported"))?;
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    let (host, port) = rest
        .rsplit_once(':')
        .ok_or_else(|| anyhow!("--url {url:?}: no port"))?;
    ensure!(
        host == "127.0.0.1" || host == "localhost",
        "--url {url:?}: the bench only talks to 127.0.0.1"
    );
    let port: u16 = port
        .parse()
        .map_err(|_| anyhow!("--url {url:?}: bad port {port:?}"))?;
    Ok(SocketAddr::from((Ipv4Addr::LOCALHOST, port)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_urls_only() {
        let local = SocketAddr::from((Ipv4Addr::LOCALHOST, 8080));
        assert_eq!(parse_local_url("http://127.0.0.1:8080").unwrap(), local);
        assert_eq!(parse_local_url("http://localhost:8080/").unwrap(), local);
        assert!(parse_local_url("http://10.0.0.1:8080").is_err());
        assert!(parse_local_url("https://127.0.0.1:8080").is_err());
        assert!(parse_local_url("http://127.0.0.1").is_err());
        assert!(parse_local_url("http://127.0.0.1:99999").is_err());
    }

    #[test]
    fn free_local_addr_never_hands_out_a_port_twice() {
        // The kernel readily gives a just-released port back; 200 picks in
        // a row would have repeated one.
        let ports: Vec<u16> = (0..200)
            .map(|_| free_local_addr().unwrap().port())
            .collect();
        let mut distinct = ports.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), ports.len());
    }

    #[test]
    fn flush_sets_store_flush_and_keeps_the_rest_of_the_config() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().join("base.yaml");
        std::fs::write(
            &base,
            "store:\n  commitlog_segment_bytes: 4194304\n  flush: async\nadmin_token: t\n",
        )
        .unwrap();
        let out = dir.path().join("out.yaml");
        write_config(Some(&base), Some(crate::Flush::Sync), None, &out).unwrap();
        let config: serde_yaml::Value =
            serde_yaml::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
        assert_eq!(config["store"]["flush"], "sync");
        assert_eq!(config["store"]["commitlog_segment_bytes"], 4194304);
        assert_eq!(config["admin_token"], "t");

        write_config(None, Some(crate::Flush::Sync), None, &out).unwrap();
        let config: serde_yaml::Value =
            serde_yaml::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
        assert_eq!(config["store"]["flush"], "sync");
    }

    #[test]
    fn an_overlay_merges_section_by_section_and_wins() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().join("base.yaml");
        std::fs::write(
            &base,
            "store:\n  commitlog_segment_bytes: 4194304\nsecurity:\n  authorization: false\n  super_users: [a]\n",
        )
        .unwrap();
        let overlay: serde_yaml::Mapping = serde_yaml::from_str(
            "security:\n  authorization: true\ntls:\n  cert_file: /c\nstore:\n  flush: async\n",
        )
        .unwrap();
        let out = dir.path().join("out.yaml");
        write_config(Some(&base), Some(crate::Flush::Sync), Some(&overlay), &out).unwrap();
        let config: serde_yaml::Value =
            serde_yaml::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
        assert_eq!(config["store"]["commitlog_segment_bytes"], 4194304);
        // --flush is the last word on store.flush.
        assert_eq!(config["store"]["flush"], "sync");
        assert_eq!(config["security"]["authorization"], true);
        assert_eq!(config["security"]["super_users"][0], "a");
        assert_eq!(config["tls"]["cert_file"], "/c");

        write_config(Some(&base), None, Some(&overlay), &out).unwrap();
        let config: serde_yaml::Value =
            serde_yaml::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
        assert_eq!(config["store"]["flush"], "async");
    }
}
