//! Transactions: compares, then the success operations if every compare
//! holds, else the failure operations, all at one revision.
//!
//! A compare on a key that does not exist sees every revision and the
//! version as 0 (so `create_revision == 0` means "absent") and fails on
//! its value.

use super::client::{Ctx, EtcdClient};
use super::error::EtcdError;
use super::kv::{decode_range, delete_request, put_request, range_request, subject, KeyValue};
use super::lease::LeaseId;
use super::wire::{self, b64};
use super::Revision;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompareOp {
    Equal,
    Greater,
    Less,
    NotEqual,
}

impl CompareOp {
    fn wire(self) -> &'static str {
        match self {
            CompareOp::Equal => "EQUAL",
            CompareOp::Greater => "GREATER",
            CompareOp::Less => "LESS",
            CompareOp::NotEqual => "NOT_EQUAL",
        }
    }
}

/// What a compare reads of its key.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Target {
    Value(Vec<u8>),
    Version(i64),
    CreateRevision(Revision),
    ModRevision(Revision),
}

/// One condition of a txn: `key`'s value, version, create or mod revision
/// against an operand.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Compare {
    key: Vec<u8>,
    op: CompareOp,
    target: Target,
}

impl Compare {
    pub fn value(key: &[u8], op: CompareOp, value: &[u8]) -> Compare {
        Compare {
            key: key.to_vec(),
            op,
            target: Target::Value(value.to_vec()),
        }
    }

    pub fn version(key: &[u8], op: CompareOp, version: i64) -> Compare {
        Compare {
            key: key.to_vec(),
            op,
            target: Target::Version(version),
        }
    }

    pub fn create_revision(key: &[u8], op: CompareOp, revision: Revision) -> Compare {
        Compare {
            key: key.to_vec(),
            op,
            target: Target::CreateRevision(revision),
        }
    }

    pub fn mod_revision(key: &[u8], op: CompareOp, revision: Revision) -> Compare {
        Compare {
            key: key.to_vec(),
            op,
            target: Target::ModRevision(revision),
        }
    }

    fn wire(&self) -> wire::Compare {
        let mut compare = wire::Compare {
            key: b64(&self.key),
            target: "",
            result: self.op.wire(),
            version: None,
            create_revision: None,
            mod_revision: None,
            value: None,
        };
        match &self.target {
            Target::Value(v) => {
                compare.target = "VALUE";
                compare.value = Some(b64(v));
            }
            Target::Version(v) => {
                compare.target = "VERSION";
                compare.version = Some(v.to_string());
            }
            Target::CreateRevision(r) => {
                compare.target = "CREATE";
                compare.create_revision = Some(r.0.to_string());
            }
            Target::ModRevision(r) => {
                compare.target = "MOD";
                compare.mod_revision = Some(r.0.to_string());
            }
        }
        compare
    }
}

/// One operation of a txn. etcd refuses a txn that puts or deletes one key
/// twice in a branch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    Put {
        key: Vec<u8>,
        value: Vec<u8>,
        lease: Option<LeaseId>,
    },
    Get {
        key: Vec<u8>,
    },
    GetPrefix {
        prefix: Vec<u8>,
    },
    Delete {
        key: Vec<u8>,
    },
}

impl Op {
    pub fn put(key: &[u8], value: &[u8], lease: Option<LeaseId>) -> Op {
        Op::Put {
            key: key.to_vec(),
            value: value.to_vec(),
            lease,
        }
    }

    pub fn get(key: &[u8]) -> Op {
        Op::Get { key: key.to_vec() }
    }

    pub fn get_prefix(prefix: &[u8]) -> Op {
        Op::GetPrefix {
            prefix: prefix.to_vec(),
        }
    }

    pub fn delete(key: &[u8]) -> Op {
        Op::Delete { key: key.to_vec() }
    }

    fn wire(&self) -> wire::RequestOp {
        match self {
            Op::Put { key, value, lease } => wire::RequestOp::Put(put_request(key, value, *lease)),
            Op::Get { key } => wire::RequestOp::Range(range_request(key, false)),
            Op::GetPrefix { prefix } => wire::RequestOp::Range(range_request(prefix, true)),
            Op::Delete { key } => wire::RequestOp::DeleteRange(delete_request(key)),
        }
    }
}

/// A transaction, built by its compares and branches.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Txn {
    compares: Vec<Compare>,
    success: Vec<Op>,
    failure: Vec<Op>,
}

impl Txn {
    pub fn new() -> Txn {
        Txn::default()
    }

    /// Adds a condition: the success branch runs only if all hold.
    pub fn when(mut self, compare: Compare) -> Txn {
        self.compares.push(compare);
        self
    }

    /// Adds an operation to the success branch.
    pub fn and_then(mut self, op: Op) -> Txn {
        self.success.push(op);
        self
    }

    /// Adds an operation to the failure branch.
    pub fn or_else(mut self, op: Op) -> Txn {
        self.failure.push(op);
        self
    }

    fn subject(&self) -> String {
        let first = self.compares.first().map(|c| &c.key).or_else(|| {
            self.success.first().map(|op| match op {
                Op::Put { key, .. } | Op::Get { key } | Op::Delete { key } => key,
                Op::GetPrefix { prefix } => prefix,
            })
        });
        format!("txn on {}", first.map(|k| subject(k)).unwrap_or_default())
    }
}

/// One operation's answer, in the order of the branch that ran.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OpResponse {
    Put,
    Get { kvs: Vec<KeyValue> },
    Delete { deleted: i64 },
}

/// A transaction's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnResponse {
    /// Every compare held: the success branch ran (else the failure one).
    pub succeeded: bool,
    pub responses: Vec<OpResponse>,
    /// The store's revision after the txn: its puts' revision if it wrote.
    pub revision: Revision,
}

const TXN: &str = "/v3/kv/txn";

impl EtcdClient {
    /// Runs `txn` atomically.
    pub async fn txn(&self, txn: &Txn) -> Result<TxnResponse, EtcdError> {
        let subject = txn.subject();
        let request = wire::TxnRequest {
            compare: txn.compares.iter().map(Compare::wire).collect(),
            success: txn.success.iter().map(Op::wire).collect(),
            failure: txn.failure.iter().map(Op::wire).collect(),
        };
        let lease = txn
            .success
            .iter()
            .chain(&txn.failure)
            .find_map(|op| match op {
                Op::Put { lease, .. } => *lease,
                _ => None,
            });
        let (answer, endpoint) = self
            .call::<_, wire::TxnResponse>(TXN, &subject, &request)
            .await
            .map_err(|e| e.lease_not_found_as_expired(lease))?;
        let ctx = Ctx {
            endpoint: &endpoint,
            path: TXN,
            subject: &subject,
        };
        let branch = if answer.succeeded {
            &txn.success
        } else {
            &txn.failure
        };
        if answer.responses.len() != branch.len() {
            return Err(ctx.bad_answer(format!(
                "{} answers to {} operations",
                answer.responses.len(),
                branch.len()
            )));
        }
        let responses = answer
            .responses
            .into_iter()
            .zip(branch)
            .map(|(response, op)| match (op, response) {
                (
                    Op::Put { .. },
                    wire::ResponseOp {
                        response_put: Some(_),
                        ..
                    },
                ) => Ok(OpResponse::Put),
                (
                    Op::Get { .. } | Op::GetPrefix { .. },
                    wire::ResponseOp {
                        response_range: Some(range),
                        ..
                    },
                ) => Ok(OpResponse::Get {
                    kvs: decode_range(&ctx, range)?.kvs,
                }),
                (
                    Op::Delete { .. },
                    wire::ResponseOp {
                        response_delete_range: Some(d),
                        ..
                    },
                ) => Ok(OpResponse::Delete { deleted: d.deleted }),
                _ => Err(ctx.bad_answer("an answer of another kind than its operation")),
            })
            .collect::<Result<_, _>>()?;
        Ok(TxnResponse {
            succeeded: answer.succeeded,
            responses,
            revision: Revision(answer.header.revision),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_compare_names_its_target_and_sets_only_its_operand() {
        let json = |c: Compare| serde_json::to_string(&c.wire()).unwrap();
        assert_eq!(
            json(Compare::create_revision(
                b"m",
                CompareOp::Equal,
                Revision(0)
            )),
            r#"{"key":"bQ==","target":"CREATE","result":"EQUAL","create_revision":"0"}"#
        );
        assert_eq!(
            json(Compare::mod_revision(b"m", CompareOp::Less, Revision(12))),
            r#"{"key":"bQ==","target":"MOD","result":"LESS","mod_revision":"12"}"#
        );
        assert_eq!(
            json(Compare::version(b"m", CompareOp::Greater, 2)),
            r#"{"key":"bQ==","target":"VERSION","result":"GREATER","version":"2"}"#
        );
        assert_eq!(
            json(Compare::value(b"m", CompareOp::NotEqual, b"x")),
            r#"{"key":"bQ==","target":"VALUE","result":"NOT_EQUAL","value":"eA=="}"#
        );
    }
}
