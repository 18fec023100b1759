//! OffsetCommit (8): a member's commit (a generation: checked by the
//! coordinator as `CommitOrigin::Member`) or a commit without membership
//! (generation -1: `CommitOrigin::Stateless`, only while the group has no
//! members), into the same `__consumer_offsets` as HTTP's commits
//! (`Broker::commit_offsets`, blocking: run as the crate runs blocking
//! calls). The committed offset is the next offset to read.
//!
//! Kafka answers per partition, the broker commits all or nothing: a
//! partition that fails on its own (unknown, a negative offset, metadata
//! over `groups::validate_commit_metadata`'s bound) gets its code and the rest are
//! committed together; a refusal of the commit as a whole (the group or
//! member, the store) is every remaining partition's code.

use tidelog_broker::Door;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::{OffsetCommitRequest, OffsetCommitResponse};
use tidelog_broker::groups::Committer;
use tidelog_broker::groups::{validate_commit_metadata, CommitValue, OffsetCommit};
use tidelog_broker::security::acl::{Operation, Resource};

use super::cluster::coordinator;
use super::{group, partition_ref};
use crate::context::Context;
use crate::error::{broker_code, coordinator_code};

const STATELESS: i32 = -1;

pub async fn handle(ctx: &Context, request: OffsetCommitRequest) -> OffsetCommitResponse {
    // Not the coordinator (or not ready): every partition answers so.
    let (door, not_served) = match coordinator(ctx, group::NOT_READY) {
        Ok(door) => (Some(door), group::NOT_READY),
        Err(code) => (None, code),
    };
    // READ on the group first, as Kafka checks it: without it every
    // partition is refused for the group, whatever its topic.
    let group_id = Resource::group(request.group_id.0.as_str());
    let group_refused = door
        .as_ref()
        .is_some_and(|d| !d.may(Operation::Read, group_id));
    // (topic, partition index, code so far: 0 = to commit)
    let mut answers: Vec<(usize, i32, i16)> = Vec::new();
    let mut commits = Vec::new();
    for (t, topic) in request.topics.iter().enumerate() {
        let name = topic.name.0.as_str();
        for p in &topic.partitions {
            let metadata = p.committed_metadata.as_ref().map_or("", |m| m.as_str());
            let code = match (&door, partition_ref(door.as_ref(), name, p.partition_index)) {
                (None, _) => not_served,
                _ if group_refused => ResponseError::GroupAuthorizationFailed.code(),
                (_, Err(code)) => code,
                _ if p.committed_offset < 0 => ResponseError::InvalidCommitOffsetSize.code(),
                (Some(_), Ok(part)) => match validate_commit_metadata(commits.len(), metadata) {
                    Err(e) => broker_code(&e),
                    Ok(()) => {
                        commits.push(OffsetCommit {
                            topic: name.to_owned(),
                            partition: part.partition(),
                            value: CommitValue {
                                offset: p.committed_offset.unsigned_abs(),
                                metadata: metadata.to_owned(),
                                // v6+; -1 (and older versions) is none.
                                leader_epoch: (p.committed_leader_epoch >= 0)
                                    .then_some(p.committed_leader_epoch),
                                ..Default::default()
                            },
                        });
                        0
                    }
                },
            };
            answers.push((t, p.partition_index, code));
        }
    }
    let committed = match door {
        Some(door) if !commits.is_empty() => commit(&door, &request, commits).await,
        _ => 0,
    };
    let mut topics: Vec<OffsetCommitResponseTopic> = request
        .topics
        .iter()
        .map(|t| OffsetCommitResponseTopic::default().with_name(t.name.clone()))
        .collect();
    for (t, index, code) in answers {
        let code = if code == 0 { committed } else { code };
        topics[t].partitions.push(
            OffsetCommitResponsePartition::default()
                .with_partition_index(index)
                .with_error_code(code),
        );
    }
    OffsetCommitResponse::default().with_topics(topics)
}

/// Commits `commits` as one; the code every one of them answers.
async fn commit(door: &Door, request: &OffsetCommitRequest, commits: Vec<OffsetCommit>) -> i16 {
    let group = request.group_id.0.as_str().to_owned();
    let generation = request.generation_id_or_member_epoch;
    let member_id = request.member_id.as_str().to_owned();
    let instance_id = group::id(request.group_instance_id.as_ref()).map(str::to_owned);
    if generation != STATELESS && generation < 0 {
        return ResponseError::IllegalGeneration.code();
    }
    let committer = match u32::try_from(generation) {
        Ok(generation) => Committer::Member {
            member_id,
            instance_id,
            generation,
        },
        Err(_) => Committer::Stateless,
    };
    match door.commit(group, commits, committer).await {
        Ok(()) => 0,
        Err(e) => coordinator_code(&e),
    }
}
