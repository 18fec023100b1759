//! `tidelog restore`: the offline restore of a data dir from a remote tier
//! (`tidelog_broker::restore`, docs/TIERED.md "Restore"). The same restore
//! runs at `serve` when the data dir is empty and `tiered.url` is set.
//!
//! Exit codes as `serve`'s: 2 for a bad url or flag (nothing was read), 1
//! for a restore that failed (the bucket unreachable, a data dir in use,
//! a check of what the bucket holds).

use std::path::PathBuf;
use std::process::ExitCode;

use tidelog_tiered::{RemoteTier, TieredConfig};

use crate::config::LogFormat;
use crate::{EXIT_CONFIG, EXIT_RUNTIME};

/// `tidelog restore` options.
#[derive(Debug, Clone, clap::Args)]
pub struct RestoreArgs {
    /// The remote tier, as `tiered.url`: s3://bucket/prefix or
    /// file:///abs/path.
    #[arg(long = "from", value_name = "URL")]
    pub from: String,
    /// The data dir to write: missing or empty (or an interrupted restore).
    #[arg(long, value_name = "DIR")]
    pub data_dir: PathBuf,
    /// An S3-compatible server, as `tiered.endpoint`.
    #[arg(long, value_name = "URL")]
    pub endpoint: Option<String>,
    /// Allow a plain-http endpoint, as `tiered.allow_http`.
    #[arg(long)]
    pub allow_http: bool,
    /// The bucket's region, as `tiered.region`.
    #[arg(long, value_name = "REGION")]
    pub region: Option<String>,
}

impl RestoreArgs {
    /// The `tiered:` section these flags stand for.
    fn tiered_config(&self) -> TieredConfig {
        let defaults = TieredConfig::default();
        TieredConfig {
            url: Some(self.from.clone()),
            endpoint: self.endpoint.clone(),
            region: self.region.clone().unwrap_or(defaults.region.clone()),
            allow_http: self.allow_http,
            ..defaults
        }
    }
}

pub fn run(args: RestoreArgs) -> ExitCode {
    crate::init_tracing(LogFormat::Text);
    let tier = match RemoteTier::open(&args.tiered_config()) {
        Ok(tier) => tier,
        Err(e) => {
            eprintln!("tidelog restore: {e}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("tidelog restore: cannot start the async runtime: {e}");
            return ExitCode::from(EXIT_RUNTIME);
        }
    };
    match runtime.block_on(tidelog_broker::restore::restore(&args.data_dir, &tier)) {
        Ok(report) => {
            println!(
                "restored {} topics ({} partitions, {} compacted segment files, {} bytes) into {}; {} offsets are read from {}",
                report.topics,
                report.partitions,
                report.snapshot_files,
                report.snapshot_bytes,
                args.data_dir.display(),
                report.remote_offsets,
                args.from
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("tidelog restore: {e}");
            ExitCode::from(EXIT_RUNTIME)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: RestoreArgs,
    }

    #[test]
    fn the_flags_are_the_tiered_section() {
        let cli = Cli::try_parse_from([
            "restore",
            "--from",
            "s3://bucket/node-1",
            "--data-dir",
            "/srv/tidelog",
            "--endpoint",
            "http://127.0.0.1:8333",
            "--allow-http",
            "--region",
            "eu-west-1",
        ])
        .unwrap();
        let c = cli.args.tiered_config();
        assert_eq!(c.url.as_deref(), Some("s3://bucket/node-1"));
        assert_eq!(c.endpoint.as_deref(), Some("http://127.0.0.1:8333"));
        assert_eq!((c.region.as_str(), c.allow_http), ("eu-west-1", true));
        assert_eq!(c.object_bytes, TieredConfig::default().object_bytes);
        let plain =
            Cli::try_parse_from(["restore", "--from", "file:///b", "--data-dir", "d"]).unwrap();
        assert_eq!(
            plain.args.tiered_config().region,
            TieredConfig::default().region
        );
        assert!(!plain.args.tiered_config().allow_http);
        assert!(Cli::try_parse_from(["restore", "--data-dir", "d"]).is_err());
    }
}
