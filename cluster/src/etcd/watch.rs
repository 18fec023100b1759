//! Waiting for a change under a prefix, over the gateway's streamed
//! `/v3/watch`: one watch per wait, created from the revision after the
//! caller's last read, cancelled (its connection dropped) on the first
//! event or at the deadline.

use std::time::Duration;

use tokio::time::Instant;

use super::client::{read_bounded, refusal, Ctx, EtcdClient, Opened, ANSWER_BYTES_MAX};
use super::error::EtcdError;
use super::kv::subject;
use super::wire::{self, b64, StreamMessage};
use super::{prefix_end, Revision};

const WATCH: &str = "/v3/watch";

impl EtcdClient {
    /// Waits until a key under `prefix` changes after `after` (a revision
    /// the caller read at), at most `timeout`. `Some(revision)`: the first
    /// change's revision (re-read from there); `None`: nothing changed in
    /// time. Changes already compacted away count as a change at the
    /// compaction's revision: the caller re-reads either way.
    pub async fn wait_for_change(
        &self,
        prefix: &[u8],
        after: Revision,
        timeout: Duration,
    ) -> Result<Option<Revision>, EtcdError> {
        let deadline = Instant::now() + timeout;
        match tokio::time::timeout_at(deadline, self.first_change(prefix, after, timeout)).await {
            Ok(change) => change.map(Some),
            Err(_elapsed) => Ok(None),
        }
    }

    async fn first_change(
        &self,
        prefix: &[u8],
        after: Revision,
        timeout: Duration,
    ) -> Result<Revision, EtcdError> {
        let subject = format!("watch {}", subject(prefix));
        let request = wire::WatchRequest {
            create_request: wire::WatchCreateRequest {
                key: b64(prefix),
                range_end: b64(&prefix_end(prefix)),
                start_revision: (after.0.saturating_add(1)).to_string(),
            },
        };
        // The caller's deadline cuts the wait; reqwest's own timeout only
        // backs it up.
        let backstop = timeout + self.request_timeout();
        let Opened {
            endpoint,
            mut response,
        } = self.open(WATCH, &subject, &request, backstop).await?;
        let ctx = Ctx {
            endpoint: &endpoint,
            path: WATCH,
            subject: &subject,
        };
        let status = response.status().as_u16();
        if status != 200 {
            let body = read_bounded(&ctx, &mut response, backstop).await?;
            return Err(refusal(&ctx, status, &body));
        }
        let mut pending: Vec<u8> = Vec::new();
        loop {
            let Some(chunk) = response
                .chunk()
                .await
                .map_err(|e| ctx.transport(e, backstop))?
            else {
                return Err(ctx.stream_ended());
            };
            pending.extend_from_slice(&chunk);
            while let Some(end) = pending.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = pending.drain(..=end).collect();
                if let Some(revision) = change_in(&ctx, &line)? {
                    return Ok(revision);
                }
            }
            // One message may not grow past the bound.
            if pending.len() > ANSWER_BYTES_MAX {
                return Err(ctx.too_large());
            }
        }
    }
}

/// The revision a watch message reports a change at, if it does.
fn change_in(ctx: &Ctx<'_>, line: &[u8]) -> Result<Option<Revision>, EtcdError> {
    if line.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let message: StreamMessage<wire::WatchResponse> =
        serde_json::from_slice(line).map_err(|e| ctx.bad_answer(e))?;
    if let Some(e) = message.error {
        return Err(ctx.refused(
            u16::try_from(e.http_code).unwrap_or(0),
            e.grpc_code,
            e.message,
        ));
    }
    let Some(watch) = message.result else {
        return Err(ctx.bad_answer("a watch message with neither result nor error"));
    };
    if watch.canceled {
        if watch.compact_revision > 0 {
            return Ok(Some(Revision(watch.compact_revision)));
        }
        return Err(ctx.refused(200, 0, format!("watch cancelled: {}", watch.cancel_reason)));
    }
    Ok(watch
        .events
        .iter()
        .map(|e| Revision(e.kv.mod_revision))
        .min())
}

#[cfg(test)]
mod tests {
    use super::*;

    const CTX: Ctx<'static> = Ctx {
        endpoint: "http://h:1",
        path: WATCH,
        subject: "watch p",
    };

    #[test]
    fn a_watch_message_reports_its_events_first_revision_or_a_compaction() {
        let created = br#"{"result":{"header":{"revision":"3"},"created":true}}"#;
        assert_eq!(change_in(&CTX, created).unwrap(), None);
        let events = br#"{"result":{"header":{"revision":"5"},"events":[{"kv":{"key":"cDE=","mod_revision":"4"}},{"type":"DELETE","kv":{"key":"cDI=","mod_revision":"5"}}]}}"#;
        assert_eq!(change_in(&CTX, events).unwrap(), Some(Revision(4)));
        let compacted = br#"{"result":{"header":{},"canceled":true,"compact_revision":"5"}}"#;
        assert_eq!(change_in(&CTX, compacted).unwrap(), Some(Revision(5)));
        let error = br#"{"error":{"grpc_code":14,"http_code":503,"message":"unavailable"}}"#;
        assert!(matches!(
            change_in(&CTX, error),
            Err(EtcdError::Refused { code: 14, .. })
        ));
        assert!(matches!(
            change_in(&CTX, b"{"),
            Err(EtcdError::BadAnswer { .. })
        ));
    }
}
