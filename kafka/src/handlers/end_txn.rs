//! EndTxn (26) v0-3: commit or abort a producer's transaction
//! (`Door::end_txn`), answered once its markers are durable in every
//! partition it added.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{EndTxnRequest, EndTxnResponse};

use super::cluster::coordinator;
use crate::context::Context;
use crate::error::txn_error_code;

pub async fn handle(ctx: &Context, request: EndTxnRequest) -> EndTxnResponse {
    let door = match coordinator(ctx, ResponseError::CoordinatorLoadInProgress.code()) {
        Ok(door) => door,
        Err(code) => return EndTxnResponse::default().with_error_code(code),
    };
    let done = door
        .end_txn(
            request.transactional_id.0.to_string(),
            request.producer_id.0,
            request.producer_epoch,
            request.committed,
        )
        .await;
    match done {
        Ok(()) => EndTxnResponse::default(),
        Err(e) => {
            tracing::debug!(error = %e, "EndTxn refused");
            EndTxnResponse::default().with_error_code(txn_error_code(&e))
        }
    }
}
