//! AddOffsetsToTxn (25) v0-3: the producer's transaction will commit a
//! consumer group's offsets (`Door::add_offsets_to_txn`): the step
//! before TxnOffsetCommit in confluent-kafka's
//! `send_offsets_to_transaction`.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{AddOffsetsToTxnRequest, AddOffsetsToTxnResponse};

use super::cluster::coordinator;
use crate::context::Context;
use crate::error::txn_error_code;

pub async fn handle(ctx: &Context, request: AddOffsetsToTxnRequest) -> AddOffsetsToTxnResponse {
    let door = match coordinator(ctx, ResponseError::CoordinatorLoadInProgress.code()) {
        Ok(door) => door,
        Err(code) => return AddOffsetsToTxnResponse::default().with_error_code(code),
    };
    let done = door
        .add_offsets_to_txn(
            request.transactional_id.0.to_string(),
            request.producer_id.0,
            request.producer_epoch,
            request.group_id.0.to_string(),
        )
        .await;
    match done {
        Ok(()) => AddOffsetsToTxnResponse::default(),
        Err(e) => {
            tracing::debug!(error = %e, "AddOffsetsToTxn refused");
            AddOffsetsToTxnResponse::default().with_error_code(txn_error_code(&e))
        }
    }
}
