//! ListTransactions (66) v0-1 (KIP-664): the transactional ids this
//! coordinator has, with their producer id and state, filtered by state
//! names, producer ids and (v1) how long an open transaction has run;
//! only ids the principal may DESCRIBE. A state name that is no state is
//! answered in `unknown_state_filters`, as Kafka does. In a cluster
//! only the master coordinates transactions: a replica lists none, as a
//! Kafka broker lists only the ids it coordinates.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::list_transactions_response::TransactionState;
use kafka_protocol::messages::{
    ListTransactionsRequest, ListTransactionsResponse, ProducerId, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;

use super::cluster::Nodes;
use crate::context::Context;

pub fn handle(ctx: &Context, request: ListTransactionsRequest) -> ListTransactionsResponse {
    let Some(door) = ctx.door() else {
        return ListTransactionsResponse::default()
            .with_error_code(ResponseError::CoordinatorLoadInProgress.code());
    };
    if !Nodes::of(Some(&door)).leads() {
        return ListTransactionsResponse::default();
    }
    let states: Vec<String> = request
        .state_filters
        .iter()
        .map(|s| s.to_string())
        .collect();
    let producers: Vec<i64> = request.producer_id_filters.iter().map(|p| p.0).collect();
    let (listed, unknown) = door.list_transactions(&states, &producers, request.duration_filter);
    ListTransactionsResponse::default()
        .with_unknown_state_filters(unknown.into_iter().map(StrBytes::from_string).collect())
        .with_transaction_states(
            listed
                .into_iter()
                .map(|(id, producer_id, state)| {
                    TransactionState::default()
                        .with_transactional_id(TransactionalId(StrBytes::from_string(id)))
                        .with_producer_id(ProducerId(producer_id))
                        .with_transaction_state(StrBytes::from_static_str(state))
                })
                .collect(),
        )
}
