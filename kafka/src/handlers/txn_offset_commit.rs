//! TxnOffsetCommit (28) v0-3: consumer offsets that commit with the
//! producer's transaction (`Door::txn_offset_commit`). v3 names the
//! consumer's generation and member (KIP-447): a member that is not the
//! group's current one is refused as OffsetCommit refuses it, so a zombie
//! consumer cannot commit. The call is checked whole; a refusal is every
//! partition's error code.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{TxnOffsetCommitRequest, TxnOffsetCommitResponse};
use tidelog_broker::transactions::TxnOffset;

use super::cluster::coordinator;
use crate::context::Context;
use crate::error::txn_error_code;

pub async fn handle(
    ctx: &Context,
    version: i16,
    request: TxnOffsetCommitRequest,
) -> TxnOffsetCommitResponse {
    let code = match coordinator(ctx, ResponseError::CoordinatorLoadInProgress.code()) {
        Err(code) => code,
        Ok(door) => {
            let mut offsets = Vec::new();
            let mut bad = false;
            for t in &request.topics {
                for p in &t.partitions {
                    let (Ok(partition), Ok(offset)) = (
                        u32::try_from(p.partition_index),
                        u64::try_from(p.committed_offset),
                    ) else {
                        bad = true;
                        continue;
                    };
                    offsets.push((
                        t.name.0.to_string(),
                        partition,
                        TxnOffset {
                            offset,
                            leader_epoch: (p.committed_leader_epoch >= 0)
                                .then_some(p.committed_leader_epoch),
                            metadata: p
                                .committed_metadata
                                .as_ref()
                                .map(|m| m.to_string())
                                .unwrap_or_default(),
                        },
                    ));
                }
            }
            let member = u32::try_from(request.generation_id)
                .ok()
                .filter(|_| version >= 3)
                .map(|generation| {
                    (
                        request.member_id.to_string(),
                        request.group_instance_id.as_ref().map(|i| i.to_string()),
                        generation,
                    )
                });
            if bad {
                ResponseError::InvalidCommitOffsetSize.code()
            } else {
                let done = door
                    .txn_offset_commit(
                        request.transactional_id.0.to_string(),
                        request.producer_id.0,
                        request.producer_epoch,
                        request.group_id.0.to_string(),
                        member,
                        offsets,
                    )
                    .await;
                match done {
                    Ok(()) => 0,
                    Err(e) => {
                        tracing::debug!(error = %e, "TxnOffsetCommit refused");
                        txn_error_code(&e)
                    }
                }
            }
        }
    };
    let topics = request
        .topics
        .iter()
        .map(|t| {
            TxnOffsetCommitResponseTopic::default()
                .with_name(t.name.clone())
                .with_partitions(
                    t.partitions
                        .iter()
                        .map(|p| {
                            TxnOffsetCommitResponsePartition::default()
                                .with_partition_index(p.partition_index)
                                .with_error_code(code)
                        })
                        .collect(),
                )
        })
        .collect();
    TxnOffsetCommitResponse::default().with_topics(topics)
}
