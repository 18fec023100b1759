//! DeleteTopics (20): each topic through `Broker::delete_topic` (the HTTP
//! admin API's delete: registry, compacted logs, queues), its own error
//! code per topic. v6 names topics by name or id; tidelog has no topic
//! ids, so a topic named only by id is UNKNOWN_TOPIC_ID.

use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::admin;
use crate::context::Context;
use crate::error::Refusal;

pub async fn handle(
    ctx: &Context,
    gate: admin::Gate,
    version: i16,
    request: DeleteTopicsRequest,
) -> DeleteTopicsResponse {
    let door = ctx.door();
    // v0-5 list names; v6 lists (name, id) states.
    let named: Vec<(Option<TopicName>, _)> = if version >= 6 {
        request
            .topics
            .into_iter()
            .map(|t| (t.name, t.topic_id))
            .collect()
    } else {
        request
            .topic_names
            .into_iter()
            .map(|n| (Some(n), Default::default()))
            .collect()
    };
    let mut responses = Vec::with_capacity(named.len());
    for (name, topic_id) in named {
        let result = DeletableTopicResult::default()
            .with_name(name.clone())
            .with_topic_id(topic_id);
        let outcome = match (&door, gate.refusal(admin::TOPIC), name) {
            (_, Some(refused), _) => Err(refused),
            (None, None, _) => Err(Refusal::NotReady),
            (Some(door), None, None) => match door.topic_by_id(topic_id) {
                Ok(Some(topic)) => door
                    .delete_topic(&topic.name)
                    .await
                    .map_err(Refusal::from)
                    .inspect(|()| tracing::info!(topic = %topic.name, "DeleteTopics by id")),
                Ok(None) => Err(Refusal::UnknownTopicId),
                Err(e) => Err(Refusal::from(e)),
            },
            (Some(door), None, Some(name)) => door
                .delete_topic(name.0.as_str())
                .await
                .map_err(Refusal::from)
                .inspect(|()| tracing::info!(topic = %name.0, "DeleteTopics")),
        };
        responses.push(match outcome {
            Ok(()) => result,
            Err(refusal) => {
                let result = result.with_error_code(refusal.code());
                if version >= 5 {
                    result.with_error_message(Some(StrBytes::from_string(refusal.to_string())))
                } else {
                    result
                }
            }
        });
    }
    DeleteTopicsResponse::default().with_responses(responses)
}
