//! One record as the remote tier holds it: the partition's offset, the
//! producer's timestamp and tidelog's record shape (null key or value,
//! headers whose values may be null). The broker converts its own records
//! to and from it; nothing here depends on the store's types.

use bytes::Bytes;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoteRecord {
    /// The record's offset in its partition.
    pub offset: u64,
    pub timestamp_ms: i64,
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    /// tidelog's header shape: names are UTF-8, values may be null.
    pub headers: Vec<(String, Option<Bytes>)>,
}
