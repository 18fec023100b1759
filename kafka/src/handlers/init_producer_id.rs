//! InitProducerId (22) 0-4: producer ids and epochs for idempotent
//! producers, over `Broker::init_producer_id` (durable ids, never handed
//! out twice).
//!
//! Decisions:
//! * A transactional id is TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
//!   transactions are not served (KAFKA.md), and that is the answer
//!   clients report as "not authorized", not one they retry.
//! * v3+ may name the producer's current id and epoch (KIP-360, after an
//!   UNKNOWN_PRODUCER_ID or OUT_OF_ORDER_SEQUENCE_NUMBER): the same id at
//!   the next epoch, so its older batches are refused. An id this data dir
//!   never handed out gets a new one. v0-2 always get a new id.
//! * Before recovery ends: COORDINATOR_LOAD_IN_PROGRESS (retriable), as
//!   Kafka's transaction coordinator answers while it loads.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};

use crate::context::Context;
use crate::error::broker_code;

pub async fn handle(
    ctx: &Context,
    version: i16,
    request: InitProducerIdRequest,
) -> InitProducerIdResponse {
    // The answer has no message field.
    let refused = |code: i16| {
        InitProducerIdResponse::default()
            .with_error_code(code)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1)
    };
    if request
        .transactional_id
        .as_ref()
        .is_some_and(|id| !id.0.is_empty())
    {
        return refused(ResponseError::TransactionalIdAuthorizationFailed.code());
    }
    let Some(door) = ctx.door() else {
        return refused(ResponseError::CoordinatorLoadInProgress.code());
    };
    let current = (version >= 3 && request.producer_id.0 >= 0)
        .then_some((request.producer_id.0, request.producer_epoch));
    // The id file is written (fsync) once per block of ids: off the runtime.
    let answer = door.init_producer_id(current).await;
    match answer {
        Ok((id, epoch)) => InitProducerIdResponse::default()
            .with_producer_id(ProducerId(id))
            .with_producer_epoch(epoch),
        Err(e) => {
            tracing::warn!(error = %e, "InitProducerId failed");
            refused(broker_code(&e))
        }
    }
}
