//! `tidelog produce TOPIC`: records from stdin, one per line, sent in
//! batches (one produce request per `--batch-size` lines or 1 MiB of body,
//! whichever comes first).
//!
//! Every line is checked before its batch is sent (valid JSON for `json`,
//! valid base64 for `binary`), so a bad line stops the run naming its line
//! number, with every earlier batch acknowledged and none after it sent.
//! Empty lines are skipped. The server checks a request whole and writes
//! all of it or nothing, so the count printed on an error is exact.

use std::io::BufRead as _;
use std::io::IsTerminal as _;
use std::time::Instant;

use base64::Engine as _;
use bytes::Bytes;
use hyper::Method;
use serde_json::json;

use crate::error::CliError;
use crate::http::{encode, parse_json, Client, BINARY, JSON, JSON_RECORDS};
use crate::output::print_json;
use crate::Connection;

/// A request's body stops growing past this (the server's default limit
/// is 16 MiB; smaller requests keep the progress moving).
const BATCH_BYTES: usize = 1 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum InputFormat {
    /// Each line's bytes are the value (and key) as they are.
    Raw,
    /// Key and value are JSON text (`{"n":1}`, `"text"`, `42`), stored
    /// as the server canonicalizes JSON.
    Json,
    /// Key and value are base64 of the bytes to store.
    Binary,
}

#[derive(Debug, clap::Args)]
pub struct ProduceArgs {
    #[command(flatten)]
    pub connection: Connection,
    /// The topic to produce to.
    pub topic: String,
    /// Split each line at the first DELIM into key and value; a line
    /// without DELIM has no key.
    #[arg(short = 'k', long = "key-delimiter", value_name = "DELIM")]
    pub key_delimiter: Option<String>,
    /// Send every record to this partition (default: the server picks, by
    /// key or round-robin).
    #[arg(short, long)]
    pub partition: Option<u32>,
    /// How a line's key and value are written.
    #[arg(long, value_enum, default_value_t = InputFormat::Raw)]
    pub format: InputFormat,
    /// Records per produce request.
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u32).range(1..=10000))]
    pub batch_size: u32,
}

/// The records of one request, as JSON text of the `records` array's items.
struct Batch {
    body: String,
    records: u64,
}

impl Batch {
    fn new() -> Batch {
        Batch {
            body: String::from("{\"records\":["),
            records: 0,
        }
    }

    fn push(&mut self, key: Option<&str>, value: &str) {
        if self.records > 0 {
            self.body.push(',');
        }
        self.body.push_str("{\"key\":");
        self.body.push_str(key.unwrap_or("null"));
        self.body.push_str(",\"value\":");
        self.body.push_str(value);
        self.body.push('}');
        self.records += 1;
    }

    fn finish(mut self) -> (Bytes, u64) {
        self.body.push_str("]}");
        (Bytes::from(self.body), self.records)
    }
}

/// One field of a line as JSON text for the request, checked.
fn field(format: InputFormat, bytes: &[u8], line: u64, what: &str) -> Result<String, CliError> {
    let bad = |why: String| CliError::usage(format!("stdin line {line}: the {what} is {why}"));
    match format {
        InputFormat::Raw => Ok(format!(
            "\"{}\"",
            base64::engine::general_purpose::STANDARD.encode(bytes)
        )),
        InputFormat::Binary => {
            base64::engine::general_purpose::STANDARD
                .decode(bytes)
                .map_err(|e| bad(format!("not base64 ({e})")))?;
            let text = std::str::from_utf8(bytes).map_err(|e| bad(format!("not base64 ({e})")))?;
            Ok(format!("\"{text}\""))
        }
        InputFormat::Json => {
            serde_json::from_slice::<serde::de::IgnoredAny>(bytes)
                .map_err(|e| bad(format!("not JSON ({e})")))?;
            // Sent as written: the server keeps numbers as their text.
            std::str::from_utf8(bytes)
                .map(str::to_string)
                .map_err(|e| bad(format!("not UTF-8 ({e})")))
        }
    }
}

/// Splits a line into key and value at the first `delimiter`.
fn split_line<'a>(line: &'a [u8], delimiter: Option<&[u8]>) -> (Option<&'a [u8]>, &'a [u8]) {
    if let Some(delimiter) = delimiter.filter(|d| !d.is_empty()) {
        if let Some(at) = line.windows(delimiter.len()).position(|w| w == delimiter) {
            return (Some(&line[..at]), &line[at + delimiter.len()..]);
        }
    }
    (None, line)
}

/// The progress shown while producing: a bar with records/s on a terminal,
/// nothing otherwise (the summary line is printed either way).
fn progress_bar() -> Option<indicatif::ProgressBar> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = indicatif::ProgressBar::new_spinner();
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{spinner} {human_pos} records  {rate} records/s  {elapsed}",
    ) {
        // Whole records per second (`{per_sec}` prints four decimals).
        let style = style.with_key(
            "rate",
            |state: &indicatif::ProgressState, out: &mut dyn std::fmt::Write| {
                let _ = write!(out, "{:.0}", state.per_sec());
            },
        );
        bar.set_style(style);
    }
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    Some(bar)
}

pub async fn run(args: ProduceArgs) -> Result<(), CliError> {
    let mut client = args.connection.client()?;
    let path = match args.partition {
        Some(p) => format!("/topics/{}/partitions/{p}", encode(&args.topic)),
        None => format!("/topics/{}", encode(&args.topic)),
    };
    let content_type = match args.format {
        InputFormat::Json => JSON_RECORDS,
        InputFormat::Raw | InputFormat::Binary => BINARY,
    };
    let delimiter = args.key_delimiter.as_deref().map(str::as_bytes);
    let started = Instant::now();
    let bar = progress_bar();
    let mut acknowledged = 0u64;
    let mut requests = 0u64;
    let outcome = async {
        let stdin = std::io::stdin();
        let mut input = stdin.lock();
        let mut line = Vec::new();
        let mut number = 0u64;
        let mut batch = Batch::new();
        loop {
            line.clear();
            let read = input
                .read_until(b'\n', &mut line)
                .map_err(|source| CliError::Io {
                    what: "reading stdin",
                    source,
                })?;
            if read > 0 {
                number += 1;
                let mut text: &[u8] = &line;
                text = text.strip_suffix(b"\n").unwrap_or(text);
                text = text.strip_suffix(b"\r").unwrap_or(text);
                if !text.is_empty() {
                    let (key, value) = split_line(text, delimiter);
                    let key = key
                        .map(|k| field(args.format, k, number, "key"))
                        .transpose()?;
                    let value = field(args.format, value, number, "value")?;
                    batch.push(key.as_deref(), &value);
                }
            }
            let full =
                batch.records >= u64::from(args.batch_size) || batch.body.len() >= BATCH_BYTES;
            if (read == 0 || full) && batch.records > 0 {
                let (body, records) = std::mem::replace(&mut batch, Batch::new()).finish();
                send(&mut client, &path, content_type, body, records).await?;
                acknowledged += records;
                requests += 1;
                if let Some(bar) = &bar {
                    bar.inc(records);
                }
            }
            if read == 0 {
                return Ok(());
            }
        }
    }
    .await;
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    let seconds = started.elapsed().as_secs_f64();
    let rate = if seconds > 0.0 {
        acknowledged as f64 / seconds
    } else {
        0.0
    };
    match outcome {
        Ok(()) => {
            eprintln!(
                "produced {acknowledged} records to {} in {requests} requests, {seconds:.2} s ({rate:.0} records/s)",
                args.topic
            );
            if args.connection.json {
                print_json(&json!({
                    "topic": args.topic,
                    "records": acknowledged,
                    "requests": requests,
                    "seconds": seconds,
                }))?;
            }
            Ok(())
        }
        Err(e) => {
            eprintln!(
                "tidelog produce: {acknowledged} records were acknowledged before the error; none after"
            );
            Err(e)
        }
    }
}

/// One produce request; every record of the answer must have an offset.
async fn send(
    client: &mut Client,
    path: &str,
    content_type: &'static str,
    body: Bytes,
    records: u64,
) -> Result<(), CliError> {
    let what = format!("POST {path}");
    let answer = client
        .send(Method::POST, path, Some(content_type), Some(JSON), body)
        .await?;
    let answer = parse_json(&what, &answer.body)?;
    let offsets = answer["offsets"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    if offsets.len() as u64 != records {
        return Err(CliError::BadAnswer {
            what,
            reason: format!("{} offsets for {records} records", offsets.len()),
        });
    }
    if let Some(failed) = offsets.iter().find(|o| !o["error_code"].is_null()) {
        return Err(CliError::Server {
            what,
            status: 200,
            error_code: failed["error_code"].as_i64(),
            message: failed["error"]
                .as_str()
                .unwrap_or("a record failed")
                .to_string(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    #[test]
    fn lines_split_at_the_first_delimiter() {
        assert_eq!(
            split_line(b"k:v:w", Some(b":")),
            (Some(&b"k"[..]), &b"v:w"[..])
        );
        assert_eq!(split_line(b"novalue", Some(b":")), (None, &b"novalue"[..]));
        assert_eq!(
            split_line(b"a::b", Some(b"::")),
            (Some(&b"a"[..]), &b"b"[..])
        );
        assert_eq!(split_line(b"k:v", None), (None, &b"k:v"[..]));
    }

    #[test]
    fn fields_are_checked_and_encoded() {
        assert_eq!(
            field(InputFormat::Raw, b"hi", 1, "value").unwrap(),
            "\"aGk=\""
        );
        assert_eq!(
            field(InputFormat::Binary, b"aGk=", 1, "value").unwrap(),
            "\"aGk=\""
        );
        assert_eq!(field(InputFormat::Json, b"1e2", 1, "value").unwrap(), "1e2");
        let why = field(InputFormat::Json, b"{x", 7, "key")
            .unwrap_err()
            .to_string();
        assert!(why.contains("line 7") && why.contains("key"), "{why}");
        assert!(field(InputFormat::Binary, b"not base64!", 1, "value").is_err());
    }

    #[test]
    fn batches_are_json() {
        let mut batch = Batch::new();
        batch.push(Some("\"k\""), "1");
        batch.push(None, "{\"a\":2}");
        let (body, records) = batch.finish();
        assert_eq!(records, 2);
        let parsed: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            parsed,
            json!({"records":[{"key":"k","value":1},{"key":null,"value":{"a":2}}]})
        );
    }
}
