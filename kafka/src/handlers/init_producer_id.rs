//! InitProducerId (22) 0-4: producer ids and epochs for idempotent
//! producers, over `Broker::init_producer_id` (durable ids, never handed
//! out twice).
//!
//! Decisions:
//! * With a transactional id, the transaction coordinator's
//!   (`Door::init_transactional_producer`): the id's producer id at its
//!   next epoch, fencing the previous producer; a transaction left open
//!   is aborted first and the call answered CONCURRENT_TRANSACTIONS (the
//!   client retries).
//! * v3+ may name the producer's current id and epoch (KIP-360, after an
//!   UNKNOWN_PRODUCER_ID or OUT_OF_ORDER_SEQUENCE_NUMBER): the same id at
//!   the next epoch, so its older batches are refused. An id this data dir
//!   never handed out gets a new one. v0-2 always get a new id.
//! * With a transactional id on a node of a cluster that is not the
//!   master: NOT_COORDINATOR (the client finds the coordinator again).
//!   Without one, any node answers, as any Kafka broker does: each hands
//!   out ids of its own block (`Store::confine_producer_ids`), so no two
//!   nodes hand out one id and the new master knows every id a batch used
//!   (from the copied producer state). librdkafka asks the same broker
//!   again and again after a refusal, so a replica refusing would stall
//!   the producer until it reconnected.
//! * Before recovery ends: COORDINATOR_LOAD_IN_PROGRESS (retriable), as
//!   Kafka's transaction coordinator answers while it loads.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};

use super::cluster::coordinating;
use crate::context::Context;
use crate::error::{broker_code, txn_error_code};

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
    let Some(door) = ctx.door() else {
        return refused(ResponseError::CoordinatorLoadInProgress.code());
    };
    let current = (version >= 3 && request.producer_id.0 >= 0)
        .then_some((request.producer_id.0, request.producer_epoch));
    if let Some(id) = request
        .transactional_id
        .as_ref()
        .filter(|id| !id.0.is_empty())
    {
        let door = match coordinating(door) {
            Ok(door) => door,
            Err(code) => return refused(code),
        };
        let answer = door
            .init_transactional_producer(
                id.0.to_string(),
                i64::from(request.transaction_timeout_ms),
                current,
            )
            .await;
        return match answer {
            Ok((id, epoch)) => InitProducerIdResponse::default()
                .with_producer_id(ProducerId(id))
                .with_producer_epoch(epoch),
            Err(e) => {
                tracing::debug!(error = %e, "transactional InitProducerId refused");
                refused(txn_error_code(&e))
            }
        };
    }
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
