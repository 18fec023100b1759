//! Keys: get one, range over a prefix, put (optionally under a lease),
//! delete.

use super::client::{Ctx, EtcdClient};
use super::error::EtcdError;
use super::ids::LeaseId;
use super::wire::{self, b64, unb64};
use super::{prefix_end, Revision};

/// A key as etcd holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyValue {
    pub key: Vec<u8>,
    pub value: Vec<u8>,
    /// The revision of the put that created the key (since it last did
    /// not exist).
    pub create_revision: Revision,
    /// The revision of its last put.
    pub mod_revision: Revision,
    /// Puts since it was created (1 after the first).
    pub version: i64,
    /// The lease it is bound to, if any: it goes when the lease does.
    pub lease: Option<LeaseId>,
}

/// One key's read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GetResponse {
    pub kv: Option<KeyValue>,
    /// The store's revision when it was read.
    pub revision: Revision,
}

/// A range's read, keys in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RangeResponse {
    pub kvs: Vec<KeyValue>,
    pub revision: Revision,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeleteResponse {
    /// How many keys were deleted (0: there was none).
    pub deleted: i64,
    pub revision: Revision,
}

pub(crate) fn subject(key: &[u8]) -> String {
    String::from_utf8_lossy(key).into_owned()
}

pub(crate) fn decode_kv(ctx: &Ctx<'_>, kv: wire::Kv) -> Result<KeyValue, EtcdError> {
    Ok(KeyValue {
        key: unb64(&kv.key).map_err(|e| ctx.bad_answer(format!("key: {e}")))?,
        value: unb64(&kv.value).map_err(|e| ctx.bad_answer(format!("value: {e}")))?,
        create_revision: Revision(kv.create_revision),
        mod_revision: Revision(kv.mod_revision),
        version: kv.version,
        lease: (kv.lease != 0).then_some(LeaseId(kv.lease)),
    })
}

pub(crate) fn decode_range(
    ctx: &Ctx<'_>,
    answer: wire::RangeResponse,
) -> Result<RangeResponse, EtcdError> {
    // A range tidelog sends has no limit: etcd answers with all of it.
    if answer.more {
        return Err(ctx.bad_answer("a range without a limit answered in part"));
    }
    let kvs = answer
        .kvs
        .into_iter()
        .map(|kv| decode_kv(ctx, kv))
        .collect::<Result<_, _>>()?;
    Ok(RangeResponse {
        kvs,
        revision: Revision(answer.header.revision),
    })
}

pub(crate) fn range_request(key: &[u8], prefix: bool) -> wire::RangeRequest {
    wire::RangeRequest {
        key: b64(key),
        range_end: prefix.then(|| b64(&prefix_end(key))),
    }
}

pub(crate) fn put_request(key: &[u8], value: &[u8], lease: Option<LeaseId>) -> wire::PutRequest {
    wire::PutRequest {
        key: b64(key),
        value: b64(value),
        lease: lease.map(|l| l.0.to_string()),
    }
}

pub(crate) fn delete_request(key: &[u8]) -> wire::DeleteRangeRequest {
    wire::DeleteRangeRequest {
        key: b64(key),
        range_end: None,
    }
}

const RANGE: &str = "/v3/kv/range";
const PUT: &str = "/v3/kv/put";
const DELETE: &str = "/v3/kv/deleterange";

impl EtcdClient {
    /// The key, if it exists, and the store's revision.
    pub async fn get(&self, key: &[u8]) -> Result<GetResponse, EtcdError> {
        let subject = subject(key);
        let (answer, endpoint) = self
            .call::<_, wire::RangeResponse>(RANGE, &subject, &range_request(key, false))
            .await?;
        let ctx = Ctx {
            endpoint: &endpoint,
            path: RANGE,
            subject: &subject,
        };
        let range = decode_range(&ctx, answer)?;
        if range.kvs.len() > 1 {
            return Err(ctx.bad_answer("more than one key for a get"));
        }
        Ok(GetResponse {
            kv: range.kvs.into_iter().next(),
            revision: range.revision,
        })
    }

    /// Every key starting with `prefix`, in key order. The whole answer is
    /// bounded by [`ANSWER_BYTES_MAX`](super::ANSWER_BYTES_MAX).
    pub async fn range_prefix(&self, prefix: &[u8]) -> Result<RangeResponse, EtcdError> {
        let subject = subject(prefix);
        let (answer, endpoint) = self
            .call::<_, wire::RangeResponse>(RANGE, &subject, &range_request(prefix, true))
            .await?;
        let ctx = Ctx {
            endpoint: &endpoint,
            path: RANGE,
            subject: &subject,
        };
        decode_range(&ctx, answer)
    }

    /// Puts `key` = `value`, bound to `lease` if given; the put's revision.
    pub async fn put(
        &self,
        key: &[u8],
        value: &[u8],
        lease: Option<LeaseId>,
    ) -> Result<Revision, EtcdError> {
        let subject = subject(key);
        let (answer, _) = self
            .call::<_, wire::PutResponse>(PUT, &subject, &put_request(key, value, lease))
            .await
            .map_err(|e| e.lease_not_found_as_expired(lease))?;
        Ok(Revision(answer.header.revision))
    }

    /// Deletes `key` (no error when it does not exist).
    pub async fn delete(&self, key: &[u8]) -> Result<DeleteResponse, EtcdError> {
        let subject = subject(key);
        let (answer, _) = self
            .call::<_, wire::DeleteRangeResponse>(DELETE, &subject, &delete_request(key))
            .await?;
        Ok(DeleteResponse {
            deleted: answer.deleted,
            revision: Revision(answer.header.revision),
        })
    }
}
