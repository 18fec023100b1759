//! A client of etcd's v3 API (issue 39's coordination store): keys,
//! transactions with compares, leases and watches, spoken to etcd's JSON
//! gateway (`POST /v3/...`) over HTTP/1.1.
//!
//! Why the gateway and not gRPC: the `etcd-client` crate compiles etcd's
//! `.proto` files at build time and needs `protoc`, which a fresh machine
//! does not have, and the README's start command builds the server. etcd
//! (3.4 and later) serves the same v3 API as JSON at `/v3/...`: keys and
//! values base64-encoded, int64 fields as JSON strings, fields at their
//! zero value left out. A lease renewal is one POST, not a stream.
//!
//! Invariants:
//! - Every request has a deadline: the client's request timeout, or the
//!   caller's (a watch's wait, a renewal's interval).
//! - Every answer is read under a bound ([`ANSWER_BYTES_MAX`]): a body
//!   announced or grown past it is refused before more is buffered.
//! - Endpoints are tried in turn only when a connection cannot be made (the
//!   request was never sent); a request that was sent and timed out is not
//!   sent again elsewhere, since etcd may have applied it. The endpoint that
//!   last answered is tried first.
//! - etcd's refusals keep their gRPC code ([`EtcdError::Refused`]); a lease
//!   etcd no longer knows is [`EtcdError::LeaseExpired`].
//!
//! Files: [`client`] (endpoints, one bounded request), [`ids`] (lease
//! ids, named by errors and calls alike), `wire` (the
//! gateway's JSON), [`kv`] (get, range, put, delete), [`txn`] (compares and
//! operations), [`lease`] (grant, renew, revoke), [`watch`] (wait for a
//! change under a prefix), [`error`].

pub mod client;
pub mod error;
pub mod ids;
pub mod kv;
pub mod lease;
pub mod txn;
pub mod watch;
mod wire;

pub use client::{EtcdClient, ANSWER_BYTES_MAX};
pub use error::{EtcdError, EtcdErrorKind};
pub use kv::{DeleteResponse, GetResponse, KeyValue, RangeResponse};
pub use lease::{Lease, LeaseId};
pub use txn::{Compare, CompareOp, Op, OpResponse, Txn, TxnResponse};

/// An etcd revision: the store's logical clock, one step per change.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Revision(pub i64);

impl std::fmt::Display for Revision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// The end of the range of keys starting with `prefix` (etcd's
/// `range_end`): the prefix with its last byte below 0xff incremented and
/// what follows it dropped; `\0` (every key) when there is no such byte.
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

#[cfg(test)]
mod tests {
    use super::prefix_end;

    #[test]
    fn prefix_end_increments_the_last_byte_below_0xff() {
        assert_eq!(prefix_end(b"/tidelog/a/"), b"/tidelog/a0".to_vec());
        assert_eq!(prefix_end(b"a\xff\xff"), b"b".to_vec());
        assert_eq!(prefix_end(b"\xff"), vec![0]);
        assert_eq!(prefix_end(b""), vec![0]);
    }
}
