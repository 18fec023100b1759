//! `tidelog consume TOPIC`: print records, kcat-like.
//!
//! Without `-g`, each partition (or the one `-p` names) is read by fetch
//! from where `-o` says, each on its own connection and task, so one
//! partition's long-poll never holds up another's records; records of one
//! partition print in offset order. It stops at the end of every partition
//! (the default, and `-e`: the end offsets when the command started),
//! after `-c` records, or, with `-f`, only on Ctrl-C or SIGTERM.
//!
//! With `-g GROUP` it is a member of the group through a consumer instance
//! (API.md, "Consumer instances") without auto commit: after printing a
//! batch it commits exactly what it printed, so `-c 3` commits three
//! records and the group's next reader starts at the fourth. The instance
//! is deleted when the command ends, on Ctrl-C or SIGTERM too, which hands
//! its partitions to the group's other members at once.

use std::io::Write as _;

use base64::Engine as _;
use bytes::Bytes;
use hyper::Method;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::error::CliError;
use crate::format::{Format, Record};
use crate::http::{encode, Client, BINARY};
use crate::spec::OffsetSpec;
use crate::Connection;

pub const CONSUME_HELP: &str = concat!(
    "Format tokens (-F, as kcat's -f): %t topic, %p partition, %o offset, %k key, %s value, \
     %K key length, %S value length, %T timestamp (ms), %h headers (name=value,...), %% a \
     percent sign; escapes \\n \\r \\t \\\\. A null key or value prints nothing (length -1). \
     Default: '%s\\n'.\n\n",
    exit_codes_text!()
);

/// Records asked for per fetch.
const FETCH_MAX_RECORDS: u32 = 1000;
/// A following fetch's long-poll (ms); each one wakes as soon as a record
/// arrives, so this only bounds how long an idle request stays open.
const FOLLOW_TIMEOUT_MS: u32 = 10_000;
/// Not following: how long a fetch below the end waits for its records
/// to be dispatched (ms).
const END_TIMEOUT_MS: u32 = 2000;
/// A group member's records call wait (ms).
const GROUP_TIMEOUT_MS: u32 = 1000;

#[derive(Debug, clap::Args)]
pub struct ConsumeArgs {
    #[command(flatten)]
    pub connection: Connection,
    /// The topic to read.
    pub topic: String,
    /// Read only this partition (default: every partition).
    #[arg(short, long, conflicts_with = "group")]
    pub partition: Option<u32>,
    /// Where to start: beginning (default), end, N, -N (the last N of each
    /// partition) or @ms (the first record at or after that timestamp).
    /// With -g: beginning or end, where the group has no committed offset.
    #[arg(
        short,
        long,
        value_name = "beginning|end|N|-N|@ms",
        allow_hyphen_values = true
    )]
    pub offset: Option<OffsetSpec>,
    /// Consume as a member of this group, committing what is printed.
    #[arg(short, long)]
    pub group: Option<String>,
    /// Keep waiting for new records at the end (until Ctrl-C).
    #[arg(short, long, conflicts_with = "exit_at_end")]
    pub follow: bool,
    /// Exit when every partition is read to its end (the default; for
    /// kcat habits).
    #[arg(short = 'e', long = "exit-at-end")]
    pub exit_at_end: bool,
    /// Stop after this many records.
    #[arg(short, long)]
    pub count: Option<u64>,
    /// Output format per record, as kcat's -f (tokens below).
    #[arg(short = 'F', long = "format", value_parser = Format::parse)]
    pub format: Option<Format>,
}

/// A record as the binary embedded format answers it.
#[derive(Debug, Deserialize)]
struct WireRecord {
    topic: String,
    key: Option<String>,
    value: Option<String>,
    partition: u32,
    offset: u64,
    timestamp: i64,
    #[serde(default)]
    headers: Vec<WireHeader>,
}

#[derive(Debug, Deserialize)]
struct WireHeader {
    name: String,
    value: Option<String>,
}

fn decode_records(what: &str, body: &[u8]) -> Result<Vec<Record>, CliError> {
    let bad = |reason: String| CliError::BadAnswer {
        what: what.to_string(),
        reason,
    };
    let wire: Vec<WireRecord> =
        serde_json::from_slice(body).map_err(|e| bad(format!("records: {e}")))?;
    let base64 = |text: Option<String>| -> Result<Option<Vec<u8>>, CliError> {
        text.map(|t| {
            base64::engine::general_purpose::STANDARD
                .decode(t)
                .map_err(|e| bad(format!("base64: {e}")))
        })
        .transpose()
    };
    wire.into_iter()
        .map(|r| {
            Ok(Record {
                topic: r.topic,
                partition: r.partition,
                offset: r.offset,
                timestamp: r.timestamp,
                key: base64(r.key)?,
                value: base64(r.value)?,
                headers: r
                    .headers
                    .into_iter()
                    .map(|h| Ok((h.name, base64(h.value)?)))
                    .collect::<Result<_, CliError>>()?,
            })
        })
        .collect()
}

/// `--json`'s form of a record: text as a string, bytes that are not
/// UTF-8 as `{"base64": "..."}`.
fn record_json(record: &Record) -> Value {
    let bytes = |b: &Option<Vec<u8>>| match b {
        None => Value::Null,
        Some(b) => match std::str::from_utf8(b) {
            Ok(text) => json!(text),
            Err(_) => json!({"base64": base64::engine::general_purpose::STANDARD.encode(b)}),
        },
    };
    json!({
        "topic": record.topic,
        "partition": record.partition,
        "offset": record.offset,
        "timestamp": record.timestamp,
        "key": bytes(&record.key),
        "value": bytes(&record.value),
        "headers": record.headers.iter()
            .map(|(name, value)| json!({"name": name, "value": bytes(value)}))
            .collect::<Vec<_>>(),
    })
}

/// Renders and writes records, counting toward `-c`.
struct Printer {
    format: Format,
    json: bool,
    remaining: Option<u64>,
}

impl Printer {
    /// Prints as many of `records` as `-c` leaves; returns how many.
    fn print(&mut self, records: &[Record]) -> Result<usize, CliError> {
        let take = match self.remaining {
            Some(left) => records
                .len()
                .min(usize::try_from(left).unwrap_or(usize::MAX)),
            None => records.len(),
        };
        let mut out = Vec::new();
        for record in &records[..take] {
            if self.json {
                out.extend_from_slice(record_json(record).to_string().as_bytes());
                out.push(b'\n');
            } else {
                self.format.render(record, &mut out);
            }
        }
        let mut stdout = std::io::stdout().lock();
        stdout
            .write_all(&out)
            .and_then(|()| stdout.flush())
            .map_err(|source| CliError::Io {
                what: "writing to stdout",
                source,
            })?;
        if let Some(left) = &mut self.remaining {
            *left -= take as u64;
        }
        Ok(take)
    }

    fn done(&self) -> bool {
        self.remaining == Some(0)
    }
}

/// Resolves on Ctrl-C or SIGTERM (never, if neither can be listened to).
async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}

pub async fn run(args: ConsumeArgs) -> Result<(), CliError> {
    let printer = Printer {
        format: args.format.clone().unwrap_or_else(Format::value_per_line),
        json: args.connection.json,
        remaining: args.count,
    };
    if printer.done() {
        return Ok(());
    }
    let client = args.connection.client()?;
    match args.group.clone() {
        Some(group) => consume_in_group(args, client, &group, printer).await,
        None => consume_partitions(args, client, printer).await,
    }
}

async fn consume_partitions(
    args: ConsumeArgs,
    mut client: Client,
    mut printer: Printer,
) -> Result<(), CliError> {
    let topic = encode(&args.topic);
    let partitions: Vec<u32> = match args.partition {
        Some(p) => vec![p],
        None => {
            let info = client.get_json(&format!("/topics/{topic}")).await?;
            let count = info["partitions"].as_array().map_or(0, Vec::len);
            (0..u32::try_from(count).unwrap_or(u32::MAX)).collect()
        }
    };
    let spec = args.offset.unwrap_or(OffsetSpec::Beginning);
    let (sender, mut receiver) = tokio::sync::mpsc::channel(16);
    for partition in partitions {
        let (start, end) = start_offset(&mut client, &topic, partition, spec).await?;
        let mut reader = client.another();
        let sender = sender.clone();
        let topic = topic.clone();
        let follow = args.follow;
        tokio::spawn(async move {
            let mut offset = start;
            // Not following, the end is where the partition ended when the
            // command started: a record acknowledged just before may not be
            // dispatched yet, so the fetch waits for it rather than taking
            // an empty answer for the end.
            let timeout = if follow {
                FOLLOW_TIMEOUT_MS
            } else {
                END_TIMEOUT_MS
            };
            while follow || offset < end {
                let path = format!(
                    "/topics/{topic}/partitions/{partition}/records?offset={offset}&max_records={FETCH_MAX_RECORDS}&timeout={timeout}"
                );
                let fetched = reader
                    .send(Method::GET, &path, None, Some(BINARY), Bytes::new())
                    .await
                    .and_then(|answer| decode_records(&format!("GET {path}"), &answer.body));
                let records = match fetched {
                    Ok(records) => records,
                    Err(e) => {
                        let _ = sender.send(Err(e)).await;
                        return;
                    }
                };
                match records.last() {
                    Some(last) => offset = last.offset + 1,
                    // Cleaning removed the records up to the end (a compact
                    // topic), or retention deleted them.
                    None if !follow => return,
                    None => continue,
                }
                if sender.send(Ok(records)).await.is_err() {
                    return;
                }
            }
        });
    }
    drop(sender);
    let shutdown = shutdown_signal();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => return Ok(()),
            batch = receiver.recv() => match batch {
                None => return Ok(()),
                Some(Err(e)) => return Err(e),
                Some(Ok(records)) => {
                    printer.print(&records)?;
                    if printer.done() {
                        return Ok(());
                    }
                }
            },
        }
    }
}

/// Where `spec` starts in one partition, and where the partition ends now.
async fn start_offset(
    client: &mut Client,
    topic: &str,
    partition: u32,
    spec: OffsetSpec,
) -> Result<(u64, u64), CliError> {
    let path = format!("/topics/{topic}/partitions/{partition}/offsets");
    let path = match spec {
        OffsetSpec::Timestamp(ms) => format!("{path}?timestamp={ms}"),
        _ => path,
    };
    let offsets = client.get_json(&path).await?;
    let field = |name: &str| {
        offsets[name].as_u64().ok_or_else(|| CliError::BadAnswer {
            what: format!("GET {path}"),
            reason: format!("no {name} in {offsets}"),
        })
    };
    let (beginning, end) = (field("beginning_offset")?, field("end_offset")?);
    let start = match spec {
        OffsetSpec::Beginning => beginning,
        OffsetSpec::End => end,
        OffsetSpec::Absolute(n) => n.max(beginning),
        OffsetSpec::FromEnd(n) => end.saturating_sub(n).max(beginning),
        OffsetSpec::Timestamp(_) => field("offset")?,
    };
    Ok((start, end))
}

async fn consume_in_group(
    args: ConsumeArgs,
    mut client: Client,
    group: &str,
    printer: Printer,
) -> Result<(), CliError> {
    let reset = match args.offset {
        None | Some(OffsetSpec::Beginning) => "earliest",
        Some(OffsetSpec::End) => "latest",
        Some(other) => {
            return Err(CliError::usage(format!(
                "-o {other:?} with -g: a group starts at its committed offsets; -o says only \
                 where it has none (beginning or end); move a group with `tidelog groups reset-offsets`"
            )))
        }
    };
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let name = format!("tidelog-cli-{}-{nanos}", std::process::id());
    let consumers = format!("/consumers/{}", encode(group));
    client
        .send_json(
            Method::POST,
            &consumers,
            &json!({
                "name": name,
                "format": "binary",
                "auto.offset.reset": reset,
                "auto.commit.enable": "false",
            }),
        )
        .await?;
    let instance = format!("{consumers}/instances/{name}");
    let member = Member {
        group,
        name: &name,
        instance: &instance,
        topic: &args.topic,
        reset,
    };
    let outcome = member.consume(&mut client, &args, printer).await;
    // Always leave: the group's other members get the partitions now, not
    // after the instance times out.
    let left = client
        .send_json(Method::DELETE, &instance, &Value::Null)
        .await;
    outcome.and(left.map(|_| ()))
}

struct Member<'a> {
    group: &'a str,
    name: &'a str,
    instance: &'a str,
    topic: &'a str,
    reset: &'static str,
}

impl Member<'_> {
    async fn consume(
        &self,
        client: &mut Client,
        args: &ConsumeArgs,
        mut printer: Printer,
    ) -> Result<(), CliError> {
        client
            .send_json(
                Method::POST,
                &format!("{}/subscription", self.instance),
                &json!({"topics": [self.topic]}),
            )
            .await?;
        let path = format!(
            "{}/records?timeout={GROUP_TIMEOUT_MS}&max_bytes=1048576",
            self.instance
        );
        let shutdown = shutdown_signal();
        tokio::pin!(shutdown);
        loop {
            let answer = tokio::select! {
                () = &mut shutdown => {
                    // The records call was cut off mid-way.
                    client.disconnect();
                    return Ok(());
                }
                answer = client.send(Method::GET, &path, None, Some(BINARY), Bytes::new()) => answer?,
            };
            let records = decode_records(&format!("GET {path}"), &answer.body)?;
            if records.is_empty() {
                if !args.follow && self.at_end(client).await? {
                    return Ok(());
                }
                continue;
            }
            let printed = printer.print(&records)?;
            self.commit(client, &records[..printed]).await?;
            if printer.done() {
                return Ok(());
            }
        }
    }

    /// Commits the printed records: each partition's last offset (the
    /// group's committed offset becomes the next one).
    async fn commit(&self, client: &mut Client, printed: &[Record]) -> Result<(), CliError> {
        let mut last: Vec<(u32, u64)> = Vec::new();
        for record in printed {
            match last.iter_mut().find(|(p, _)| *p == record.partition) {
                Some(entry) => entry.1 = entry.1.max(record.offset),
                None => last.push((record.partition, record.offset)),
            }
        }
        if last.is_empty() {
            return Ok(());
        }
        let offsets: Vec<Value> = last
            .iter()
            .map(|(partition, offset)| {
                json!({"topic": self.topic, "partition": partition, "offset": offset})
            })
            .collect();
        client
            .send_json(
                Method::POST,
                &format!("{}/offsets", self.instance),
                &json!({ "offsets": offsets }),
            )
            .await?;
        Ok(())
    }

    /// Has this member read every partition it holds to its end? Asked of
    /// the group after an empty records call: false while the group
    /// rebalances or this member has no place in it yet (the first join
    /// waits `groups.initial_rebalance_delay_ms`), so it keeps reading.
    async fn at_end(&self, client: &mut Client) -> Result<bool, CliError> {
        let what = format!("/consumer-groups/{}", encode(self.group));
        let group = client.get_json(&what).await?;
        if group["state"] != "Stable" {
            return Ok(false);
        }
        let members = group["members"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default();
        let Some(me) = members.iter().find(|m| m["client_id"] == self.name) else {
            return Ok(false);
        };
        let offsets = group["offsets"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default();
        let held = me["assignments"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default();
        for assignment in held {
            let partition = &assignment["partition"];
            let committed = offsets
                .iter()
                .find(|o| o["topic"] == assignment["topic"] && o["partition"] == *partition);
            let at_end = match committed {
                Some(o) => o["lag"] == 0,
                // Nothing committed: reading from the end has read it all;
                // from the beginning, only an empty partition has.
                None if self.reset == "latest" => true,
                None => {
                    let path = format!(
                        "/topics/{}/partitions/{partition}/offsets",
                        encode(self.topic)
                    );
                    let offsets = client.get_json(&path).await?;
                    offsets["beginning_offset"] == offsets["end_offset"]
                }
            };
            if !at_end {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_records_decode() {
        let records = decode_records(
            "t",
            r#"[{"topic":"t","key":"aw==","value":null,"partition":1,"offset":5,"timestamp":7,
                 "headers":[{"name":"h","value":"dg=="},{"name":"n","value":null}]}]"#
                .as_bytes(),
        )
        .unwrap();
        assert_eq!(
            records,
            vec![Record {
                topic: "t".into(),
                partition: 1,
                offset: 5,
                timestamp: 7,
                key: Some(b"k".to_vec()),
                value: None,
                headers: vec![("h".into(), Some(b"v".to_vec())), ("n".into(), None)],
            }]
        );
        let json = record_json(&records[0]);
        assert_eq!(json["key"], "k");
        assert_eq!(json["value"], Value::Null);
        assert!(decode_records(
            "t",
            r#"[{"topic":"t","key":"%%","value":null,"partition":1,"offset":5,"timestamp":7}]"#
                .as_bytes()
        )
        .is_err());
    }

    #[test]
    fn bytes_that_are_not_text_render_as_base64_in_json() {
        let record = Record {
            topic: "t".into(),
            partition: 0,
            offset: 0,
            timestamp: 0,
            key: None,
            value: Some(vec![0xff, 0x00]),
            headers: vec![],
        };
        assert_eq!(record_json(&record)["value"], json!({"base64": "/wA="}));
    }
}
